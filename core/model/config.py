"""Frozen model configurations, validated on creation and stored in checkpoints."""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Union

# MobileNetV2 encoder: t (expansion), c (channels), n (repeats), s (first stride).
MOBILENET_V2_TABLE: tuple[tuple[int, int, int, int], ...] = (
    # t, c, n, s
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)


def _check_common(num_classes: int, in_channels: int) -> None:
    if not 1 <= num_classes <= 255:
        raise ValueError(f"num_classes must be in 1..255 (labels are uint8), got {num_classes}")
    if in_channels not in (1, 3):
        raise ValueError(f"in_channels must be 1 (grayscale) or 3 (RGB), got {in_channels}")


@dataclass(frozen=True)
class MobileUNetConfig:
    num_classes: int = 12  # CamVid: 11 classes + void
    in_channels: int = 3  # RGB input
    width: float = 1.0  # width multiplier on every encoder channel count
    encoder_table: tuple[tuple[int, int, int, int], ...] = MOBILENET_V2_TABLE  # t, c, n, s rows
    stem_channels: int = 32  # the first 3x3 stride-2 convolution
    decoder_channels: tuple[int, ...] = (96, 32, 24, 16)  # strides 16, 8, 4, 2
    decoder_expansion: int = 4  # expansion ratio of the decoder's inverted residuals

    def __post_init__(self) -> None:
        _check_common(self.num_classes, self.in_channels)
        if not 0.1 <= self.width <= 4.0:
            raise ValueError(f"width must be in 0.1..4.0, got {self.width}")
        object.__setattr__(self, "encoder_table", tuple(tuple(row) for row in self.encoder_table))
        object.__setattr__(self, "decoder_channels", tuple(self.decoder_channels))
        strides = [row[3] for row in self.encoder_table]
        if strides.count(2) != 4:
            raise ValueError(
                f"encoder_table needs exactly 4 stride-2 rows (total stride 32), got strides {strides}"
            )
        if len(self.decoder_channels) != 4:
            raise ValueError(
                f"decoder_channels needs 4 entries (strides 16, 8, 4, 2), got {self.decoder_channels}"
            )
        if self.decoder_expansion < 1:
            raise ValueError(f"decoder_expansion must be >= 1, got {self.decoder_expansion}")


@dataclass(frozen=True)
class PlainUNetConfig:
    num_classes: int = 12  # CamVid: 11 classes + void
    in_channels: int = 3  # RGB input
    base_channels: int = 32  # channels at full resolution, doubled per level
    depth: int = 4  # number of 2x downsamplings; total stride 2**depth

    def __post_init__(self) -> None:
        _check_common(self.num_classes, self.in_channels)
        if not 1 <= self.depth <= 6:
            raise ValueError(f"depth must be in 1..6, got {self.depth}")
        if self.base_channels < 1:
            raise ValueError(f"base_channels must be >= 1, got {self.base_channels}")


ModelConfig = Union[MobileUNetConfig, PlainUNetConfig]
CONFIG_KINDS: dict[str, type] = {"MobileUNet": MobileUNetConfig, "PlainUNet": PlainUNetConfig}


def config_to_dict(config: ModelConfig) -> dict[str, Any]:
    """{'kind': 'MobileUNet', ...fields} for checkpoint metadata."""
    kind = {MobileUNetConfig: "MobileUNet", PlainUNetConfig: "PlainUNet"}[type(config)]
    return {"kind": kind, **asdict(config)}


def config_from_dict(data: dict[str, Any]) -> ModelConfig:
    """Inverse of `config_to_dict`; raises ValueError naming unknown kinds or fields."""
    data = dict(data)
    kind = data.pop("kind", None)
    if kind not in CONFIG_KINDS:
        raise ValueError(f"unknown model kind {kind!r}; valid kinds: {sorted(CONFIG_KINDS)}")
    cls = CONFIG_KINDS[kind]
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"unknown {kind} config fields {unknown}; valid fields: {sorted(known)}")
    config: ModelConfig = cls(**data)
    return config
