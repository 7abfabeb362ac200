"""Frozen model configurations, validated on creation and stored in checkpoints."""
from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Sequence
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


# Upper bounds on what a config may ask for: far above any sensible U-Net, far below what would
# make building it allocate gigabytes. A model file is outside input; these are checked before
# any module is built.
MAX_CHANNELS = 4096  # any channel count (stem, encoder c, decoder, PlainUNet base)
MAX_REPEATS = 16  # encoder blocks per table row (n)
MAX_DILATION = 64  # context_dilations entries
MAX_EXPANSION = 16  # inverted-residual expansion ratio (encoder t, decoder_expansion)
MAX_TABLE_ROWS = 16  # rows of the encoder table
MAX_PLAIN_BOTTOM_CHANNELS = 8192  # PlainUNet base_channels * 2**depth, the widest level


def _check_int(name: str, value: object, low: int, high: int) -> int:
    """`value` as an int in low..high; ValueError naming the field otherwise (bools and floats refused)."""
    try:
        number = operator.index(value)  # type: ignore[arg-type]  # ints, numpy ints; floats raise TypeError
    except TypeError:
        number = None
    if number is None or isinstance(value, bool):
        raise ValueError(f"{name} must be a whole number in {low}..{high}, got {value!r}")
    if not low <= number <= high:
        raise ValueError(f"{name} must be in {low}..{high}, got {number}")
    return number


def _check_common(num_classes: object, in_channels: object) -> None:
    _check_int("num_classes", num_classes, 1, 255)  # labels are uint8
    if isinstance(in_channels, bool) or in_channels not in (1, 3):
        raise ValueError(f"in_channels must be 1 (grayscale) or 3 (RGB), got {in_channels!r}")


def _as_tuple(name: str, value: object) -> tuple[Any, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ValueError(f"{name} must be a list, got {value!r}")
    return tuple(value)


def _check_encoder_table(table: object) -> tuple[tuple[int, int, int, int], ...]:
    rows = _as_tuple("encoder_table", table)
    if not 1 <= len(rows) <= MAX_TABLE_ROWS:
        raise ValueError(f"encoder_table needs 1..{MAX_TABLE_ROWS} rows of t, c, n, s, got {len(rows)}")
    checked = []
    for index, row in enumerate(rows):
        values = _as_tuple(f"encoder_table row {index}", row)
        if len(values) != 4:
            raise ValueError(f"encoder_table row {index} needs 4 values (t, c, n, s), got {values!r}")
        t = _check_int(f"encoder_table row {index} t (expansion)", values[0], 1, MAX_EXPANSION)
        c = _check_int(f"encoder_table row {index} c (channels)", values[1], 1, MAX_CHANNELS)
        n = _check_int(f"encoder_table row {index} n (repeats)", values[2], 1, MAX_REPEATS)
        s = _check_int(f"encoder_table row {index} s (stride)", values[3], 1, 2)
        checked.append((t, c, n, s))
    return tuple(checked)


@dataclass(frozen=True)
class MobileUNetConfig:
    num_classes: int = 12  # CamVid: 11 classes + void
    in_channels: int = 3  # RGB input
    width: float = 1.0  # width multiplier on every encoder channel count
    encoder_table: tuple[tuple[int, int, int, int], ...] = MOBILENET_V2_TABLE  # t, c, n, s rows
    stem_channels: int = 32  # the first 3x3 stride-2 convolution
    decoder_channels: tuple[int, ...] = (96, 32, 24, 16)  # strides 16, 8, 4, 2
    decoder_expansion: int = 4  # expansion ratio of the decoder's inverted residuals
    context_dilations: tuple[int, ...] = ()  # one dilated inverted residual per entry at stride 32 (a wider
    # context before the decoder); () = none

    def __post_init__(self) -> None:
        _check_common(self.num_classes, self.in_channels)
        if isinstance(self.width, bool) or not isinstance(self.width, numbers.Real) or not 0.1 <= self.width <= 4.0:
            raise ValueError(f"width must be a number in 0.1..4.0, got {self.width!r}")
        object.__setattr__(self, "encoder_table", _check_encoder_table(self.encoder_table))
        decoder = _as_tuple("decoder_channels", self.decoder_channels)
        for index, channels in enumerate(decoder):
            _check_int(f"decoder_channels[{index}]", channels, 1, MAX_CHANNELS)
        object.__setattr__(self, "decoder_channels", decoder)
        _check_int("stem_channels", self.stem_channels, 1, MAX_CHANNELS)
        strides = [row[3] for row in self.encoder_table]
        if strides.count(2) != 4:
            raise ValueError(
                f"encoder_table needs exactly 4 stride-2 rows (total stride 32), got strides {strides}"
            )
        if len(self.decoder_channels) != 4:
            raise ValueError(
                f"decoder_channels needs 4 entries (strides 16, 8, 4, 2), got {self.decoder_channels}"
            )
        _check_int("decoder_expansion", self.decoder_expansion, 1, MAX_EXPANSION)
        context = _as_tuple("context_dilations", self.context_dilations)
        for index, dilation in enumerate(context):
            _check_int(f"context_dilations[{index}]", dilation, 1, MAX_DILATION)
        object.__setattr__(self, "context_dilations", context)


@dataclass(frozen=True)
class PlainUNetConfig:
    num_classes: int = 12  # CamVid: 11 classes + void
    in_channels: int = 3  # RGB input
    base_channels: int = 32  # channels at full resolution, doubled per level
    depth: int = 4  # number of 2x downsamplings; total stride 2**depth

    def __post_init__(self) -> None:
        _check_common(self.num_classes, self.in_channels)
        _check_int("depth", self.depth, 1, 6)
        _check_int("base_channels", self.base_channels, 1, MAX_PLAIN_BOTTOM_CHANNELS >> self.depth)


ModelConfig = Union[MobileUNetConfig, PlainUNetConfig]
OPTIONAL_FIELDS = ("context_dilations",)  # fields added after format 1 shipped; empty by default
CONFIG_KINDS: dict[str, type] = {"MobileUNet": MobileUNetConfig, "PlainUNet": PlainUNetConfig}


def config_to_dict(config: ModelConfig) -> dict[str, Any]:
    """{'kind': 'MobileUNet', ...fields} for checkpoint metadata."""
    kind = {MobileUNetConfig: "MobileUNet", PlainUNetConfig: "PlainUNet"}[type(config)]
    fields_ = asdict(config)
    for name in OPTIONAL_FIELDS:  # left out at their default, so releases before them still read the file
        if name in fields_ and not fields_[name]:
            del fields_[name]
    return {"kind": kind, **fields_}


def config_from_dict(data: dict[str, Any]) -> ModelConfig:
    """Inverse of `config_to_dict`; raises ValueError naming unknown kinds or fields."""
    if not isinstance(data, dict):
        raise ValueError(f"a model config must be a JSON object, got {type(data).__name__}")
    data = dict(data)
    kind = data.pop("kind", None)
    if not isinstance(kind, str) or kind not in CONFIG_KINDS:
        raise ValueError(f"unknown model kind {kind!r}; valid kinds: {sorted(CONFIG_KINDS)}")
    cls = CONFIG_KINDS[kind]
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"unknown {kind} config fields {unknown}; valid fields: {sorted(known)}")
    config: ModelConfig = cls(**data)
    return config


def validate_palette_and_normalisation(num_classes: int, in_channels: int, class_names: object,
                                       class_colours: object, mean: object, std: object) -> None:
    """Check what a model file says about its classes and input; ValueError naming the bad value.

    class_names: num_classes strings; class_colours: num_classes (R, G, B) ints in 0..255;
    mean, std: in_channels finite numbers, std > 0 (they normalise [0, 1] pixels).
    """
    names = _as_tuple("class_names", class_names)
    colours = _as_tuple("class_colours", class_colours)
    if len(names) != num_classes or len(colours) != num_classes:
        raise ValueError(f"{num_classes} classes need {num_classes} names and colours, got {len(names)} names "
                         f"and {len(colours)} colours")
    for index, name in enumerate(names):
        if not isinstance(name, str):
            raise ValueError(f"class_names[{index}] must be a string, got {name!r}")
    for index, colour in enumerate(colours):
        rgb = _as_tuple(f"class_colours[{index}]", colour)
        if len(rgb) != 3:
            raise ValueError(f"class_colours[{index}] must be 3 whole numbers in 0..255 (R, G, B), got {colour!r}")
        for value in rgb:
            _check_int(f"class_colours[{index}] values (R, G, B)", value, 0, 255)
    for name, values, positive in (("mean", mean, False), ("std", std, True)):
        entries = _as_tuple(name, values)
        if len(entries) != in_channels:
            raise ValueError(f"{name} needs {in_channels} values (in_channels), got {entries!r}")
        for v in entries:
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
                raise ValueError(f"{name} values must be finite numbers, got {entries!r}")
            if positive and v <= 0:
                raise ValueError(f"std values must be greater than 0 (pixels are divided by them), got {entries!r}")
