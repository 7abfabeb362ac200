"""Resume state (model, optimiser, scheduler, epoch, history): written atomically, loaded safely."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ..io.outputs import atomic_write


def save_state(path: Path, state: dict[str, Any]) -> None:
    """torch.save to a temp file in the same folder, fsync, then rename over `path`."""
    atomic_write(path, lambda handle: torch.save(state, handle))


def load_state(path: Path) -> dict[str, Any]:
    """Tensors and plain Python values only (weights_only: nothing is unpickled beyond that)."""
    try:
        state: dict[str, Any] = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:
        raise ValueError(f"{path}: cannot read the resume state ({type(err).__name__}: {err})") from err
    return state
