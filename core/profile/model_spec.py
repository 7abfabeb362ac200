"""Which model the lab profiles: a model file (any format `sources.load_model` opens), or a config
(random weights, seeded).

A spec crosses into benchmark subprocesses as a plain dict, so every configuration builds the
same model on its own.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..assets import default_model_path
from ..model import MobileUNetConfig, PlainUNetConfig, build_model
from ..model.checkpoint import LoadedModel, default_info
from ..model.config import config_from_dict, config_to_dict
from ..model.sources import load_model


@dataclass(frozen=True)
class ModelSpec:
    """A checkpoint `path`, or a `config` dict ({'kind': 'MobileUNet', ...}) built with random weights."""

    path: str | None = None  # any model file: .safetensors checkpoint, .pt2, .onnx or .leanseg bundle
    config: dict[str, Any] = field(default_factory=dict)  # used when path is None
    seed: int = 0  # random weights of a config-only model (memory and speed do not depend on them)

    def __post_init__(self) -> None:
        if self.path is None and not self.config:
            raise ValueError("a ModelSpec needs a checkpoint path or a config dict")
        if self.path is None:
            config_from_dict(self.config)  # raises ValueError naming a bad kind or field

    def load(self) -> LoadedModel:
        """The model in eval mode on the CPU, with its info (CheckpointError for a bad file)."""
        if self.path is not None:
            return load_model(self.path)
        config = config_from_dict(self.config)
        torch.manual_seed(self.seed)
        return LoadedModel(build_model(config).eval(), default_info(config), None)

    def describe(self) -> str:
        if self.path is not None:
            return Path(self.path).name
        return f"{self.config.get('kind', '?')} default config (random weights)"

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "config": dict(self.config), "seed": self.seed}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelSpec:
        return cls(data.get("path"), dict(data.get("config") or {}), int(data.get("seed", 0)))

    @classmethod
    def for_loaded(cls, loaded: LoadedModel) -> ModelSpec:
        """The spec of an already loaded model: its file (any format: a graph model's spec is its path), else
        its config with random weights; ValueError for a graph model that has no file."""
        if loaded.path is not None:
            return cls(str(loaded.path))
        if not isinstance(loaded.info.config, (MobileUNetConfig, PlainUNetConfig)):
            raise ValueError("a model opened from a graph (.pt2/.onnx) is profiled from its file; it has none")
        return cls(None, config_to_dict(loaded.info.config))


def default_spec() -> tuple[ModelSpec, str]:
    """The shipped default model if present, else MobileUNet's default config; and a line saying which."""
    path = default_model_path()
    if path.is_file():
        return ModelSpec(str(path)), f"default model {path}"
    spec = ModelSpec(None, config_to_dict(MobileUNetConfig()))
    return spec, f"no default model at {path}: using MobileUNet's default config with random weights"
