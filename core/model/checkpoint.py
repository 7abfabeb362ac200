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
from .card import default_palette
from .config import ModelConfig, config_from_dict, config_to_dict, validate_palette_and_normalisation

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
        validate_palette_and_normalisation(self.config.num_classes, self.config.in_channels, self.class_names,
                                           self.class_colours, self.mean, self.std)
        if self.ignore_index is not None and (isinstance(self.ignore_index, bool)
                                              or not isinstance(self.ignore_index, int)
                                              or not 0 <= self.ignore_index <= 255):
            raise ValueError(f"ignore_index must be a label in 0..255 or null, got {self.ignore_index!r}")
        if not isinstance(self.provenance, dict):
            raise ValueError(f"provenance must be a JSON object, got {type(self.provenance).__name__}")


@dataclass
class LoadedModel:
    model: nn.Module  # in eval mode, on the CPU
    info: ModelInfo
    path: Path | None = None


def default_info(config: ModelConfig) -> ModelInfo:
    """Generic names and a deterministic palette for an untrained or foreign model."""
    return ModelInfo(
        config=config,
        class_names=tuple(f"class {i}" for i in range(config.num_classes)),
        class_colours=default_palette(config.num_classes),
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
    """Metadata validated first, then (with_weights) the tensors' shapes against the model the metadata
    describes, built on the meta device; only then are the weights read. Nothing large is allocated
    for a file whose metadata or shapes are wrong."""
    if not path.is_file():
        raise CheckpointError(f"{path}: no such file")
    if path.stat().st_size < 8:
        raise CheckpointError(f"{path}: file is empty or truncated ({path.stat().st_size} bytes)")
    try:
        with safe_open(str(path), framework="pt") as handle:
            info = _parse_info(path, handle.metadata() or {})
            if not with_weights:
                return info, {}
            _check_shapes(path, info.config, {k: tuple(handle.get_slice(k).get_shape()) for k in handle.keys()})
            tensors = {k: handle.get_tensor(k) for k in handle.keys()}
    except (SafetensorError, OSError, ValueError, RuntimeError) as err:
        raise CheckpointError(
            f"{path}: not a readable safetensors file (truncated or another format?): {err}"
        ) from err
    return info, tensors


def _parse_info(path: Path, metadata: dict[str, str]) -> ModelInfo:
    if METADATA_KEY not in metadata:
        raise CheckpointError(f"{path}: a safetensors file, but not a leanseg checkpoint (no metadata)")
    try:
        meta = json.loads(metadata[METADATA_KEY])
        version = int(meta.get("format_version", 0))
    except (ValueError, TypeError, AttributeError, RecursionError, OverflowError) as err:
        raise CheckpointError(f"{path}: damaged leanseg metadata: {err}") from err
    if version > FORMAT_VERSION:
        raise CheckpointError(
            f"{path}: checkpoint format version {version} is newer than this leanseg supports "
            f"({FORMAT_VERSION}); upgrade leanseg to load it"
        )
    try:
        info = ModelInfo(
            config=config_from_dict(meta["config"]),
            class_names=_as_list(meta["class_names"]),  # each field validated in ModelInfo
            class_colours=tuple(_as_list(c) for c in _as_list(meta["class_colours"])),
            mean=_as_list(meta["mean"]),
            std=_as_list(meta["std"]),
            ignore_index=meta.get("ignore_index"),
            provenance=meta.get("provenance") or {},
        )
    except (KeyError, ValueError, TypeError, RecursionError) as err:
        raise CheckpointError(f"{path}: invalid model metadata: {err}") from err
    return info


def _as_list(value: Any) -> Any:
    """A JSON list as a tuple; anything else is left for validation to refuse."""
    return tuple(value) if isinstance(value, list) else value


def _check_shapes(path: Path, config: ModelConfig, file_shapes: dict[str, tuple[int, ...]]) -> None:
    """The model the config describes, built on the meta device (no memory), must have exactly the
    file's tensors with the file's shapes; CheckpointError naming the first differences otherwise."""
    with torch.device("meta"):
        model = build_model(config)
    wanted = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    problems = [f"{k} is {list(file_shapes[k])}, the config needs {list(shape)}"
                for k, shape in wanted.items() if k in file_shapes and file_shapes[k] != shape]
    problems += [f"missing {k}" for k in wanted if k not in file_shapes]
    problems += [f"unexpected {k}" for k in file_shapes if k not in wanted]
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise CheckpointError(f"{path}: weights do not match the model config: {'; '.join(problems[:3])}{more}")
