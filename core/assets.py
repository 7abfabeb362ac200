"""Where the shipped assets (default model, samples) live; never downloads anything."""
from __future__ import annotations

import os
from pathlib import Path

DEFAULT_MODEL_NAME = "camvid_mobileunet.safetensors"


def assets_dir() -> Path:
    """`$LEANSEG_ASSETS`, else the repository's assets/ folder (next to core/)."""
    override = os.environ.get("LEANSEG_ASSETS")
    if override:
        return Path(override)
    return Path(__file__).resolve().parent.parent / "assets"


def default_model_path() -> Path:
    return assets_dir() / "models" / DEFAULT_MODEL_NAME


def sample_images() -> list[Path]:
    return sorted((assets_dir() / "samples").glob("*.png"))
