"""Checkpoints: safetensors weights plus a JSON metadata block. Loading never unpickles."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file
from torch import nn

from ..io.outputs import FILE_MODE, new_temp_file
from . import build_model
from .config import ModelConfig, config_from_dict, config_to_dict

FORMAT_VERSION = 1
METADATA_KEY = "leanseg"


class CheckpointError(Exception):
    """A file that cannot be loaded as a leanseg checkpoint; the message names file and reason."""


@dataclass(frozen=True)
class ModelInfo:
    """Everything besides weights that a checkpoint carries."""

    config: ModelConfig
    class_names: tuple[str, ...]  # one per output channel
    class_colours: tuple[tuple[int, int, int], ...]  # RGB 0-255, one per class
    mean: tuple[float, ...] = (0.485, 0.456, 0.406)  # input normalisation on [0, 1] pixels
    std: tuple[float, ...] = (0.229, 0.224, 0.225)
    ignore_index: int | None = None  # label that means "unlabelled" (not predicted usefully)
    provenance: dict[str, Any] = field(default_factory=dict)  # data, command, epochs, metric

    def __post_init__(self) -> None:
        k = self.config.num_classes
        if len(self.class_names) != k or len(self.class_colours) != k:
            raise ValueError(
                f"{k} classes need {k} names and colours, got {len(self.class_names)} names "
                f"and {len(self.class_colours)} colours"
            )
        c = self.config.in_channels
        if len(self.mean) != c or len(self.std) != c:
            raise ValueError(f"mean and std need {c} values (in_channels), got {self.mean}, {self.std}")


@dataclass
class LoadedModel:
    model: nn.Module  # in eval mode, on the CPU
    info: ModelInfo
    path: Path | None = None


def default_info(config: ModelConfig) -> ModelInfo:
    """Generic names and a deterministic palette for an untrained or foreign model."""
    generator = torch.Generator().manual_seed(0)
    colours = torch.randint(40, 256, (config.num_classes, 3), generator=generator).tolist()
    return ModelInfo(
        config=config,
        class_names=tuple(f"class {i}" for i in range(config.num_classes)),
        class_colours=tuple((int(r), int(g), int(b)) for r, g, b in colours),
        mean=(0.5,) * config.in_channels,
        std=(0.25,) * config.in_channels,
    )


def _info_to_json(info: ModelInfo) -> str:
    return json.dumps(
        {
            "format_version": FORMAT_VERSION,
            "config": config_to_dict(info.config),
            "class_names": list(info.class_names),
            "class_colours": [list(c) for c in info.class_colours],
            "mean": list(info.mean),
            "std": list(info.std),
            "ignore_index": info.ignore_index,
            "provenance": info.provenance,
        }
    )


def save_checkpoint(path: str | Path, model: nn.Module, info: ModelInfo) -> Path:
    """Write weights + metadata atomically (temp file, then rename). Returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().to("cpu").contiguous() for k, v in model.state_dict().items()}
    fd, tmp = new_temp_file(path)
    os.close(fd)
    try:
        save_file(tensors, tmp, metadata={METADATA_KEY: _info_to_json(info)})
        os.chmod(tmp, FILE_MODE)  # safetensors writes a fresh file
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def read_info(path: str | Path) -> ModelInfo:
    """Metadata only (no weights), validated; raises CheckpointError."""
    return _read(Path(path), with_weights=False)[0]


def load_checkpoint(path: str | Path) -> LoadedModel:
    """Build the model a checkpoint describes and load its weights (CPU, eval mode)."""
    path = Path(path)
    info, tensors = _read(path, with_weights=True)
    model = build_model(info.config)
    try:
        model.load_state_dict(tensors, strict=True)
    except RuntimeError as err:
        first = str(err).splitlines()[0:3]
        raise CheckpointError(f"{path}: weights do not match the model config ({' '.join(first)})") from err
    return LoadedModel(model=model.eval(), info=info, path=path)


def _read(path: Path, with_weights: bool) -> tuple[ModelInfo, dict[str, torch.Tensor]]:
    if not path.is_file():
        raise CheckpointError(f"{path}: no such file")
    if path.stat().st_size < 8:
        raise CheckpointError(f"{path}: file is empty or truncated ({path.stat().st_size} bytes)")
    try:
        with safe_open(str(path), framework="pt") as handle:
            metadata = handle.metadata() or {}
            tensors = {k: handle.get_tensor(k) for k in handle.keys()} if with_weights else {}
    except (SafetensorError, OSError, ValueError, RuntimeError) as err:
        raise CheckpointError(
            f"{path}: not a readable safetensors file (truncated or another format?): {err}"
        ) from err
    if METADATA_KEY not in metadata:
        raise CheckpointError(f"{path}: a safetensors file, but not a leanseg checkpoint (no metadata)")
    try:
        meta = json.loads(metadata[METADATA_KEY])
        version = int(meta.get("format_version", 0))
    except (ValueError, TypeError, AttributeError) as err:
        raise CheckpointError(f"{path}: damaged leanseg metadata: {err}") from err
    if version > FORMAT_VERSION:
        raise CheckpointError(
            f"{path}: checkpoint format version {version} is newer than this leanseg supports "
            f"({FORMAT_VERSION}); upgrade leanseg to load it"
        )
    try:
        info = ModelInfo(
            config=config_from_dict(meta["config"]),
            class_names=tuple(meta["class_names"]),
            class_colours=tuple(tuple(int(v) for v in c) for c in meta["class_colours"]),  # type: ignore[misc]
            mean=tuple(float(v) for v in meta["mean"]),
            std=tuple(float(v) for v in meta["std"]),
            ignore_index=meta.get("ignore_index"),
            provenance=dict(meta.get("provenance") or {}),
        )
    except (KeyError, ValueError, TypeError) as err:
        raise CheckpointError(f"{path}: invalid model metadata: {err}") from err
    return info, tensors
