"""Resume state (model, optimiser, scheduler, epoch, history): written atomically, loaded safely."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from ..io.outputs import new_temp_file


def save_state(path: Path, state: dict[str, Any]) -> None:
    """torch.save to a temp file in the same folder, fsync, then rename over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = new_temp_file(path)
    try:
        with os.fdopen(fd, "wb") as handle:
            torch.save(state, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_state(path: Path) -> dict[str, Any]:
    """Tensors and plain Python values only (weights_only: nothing is unpickled beyond that)."""
    try:
        state: dict[str, Any] = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:
        raise ValueError(f"{path}: cannot read the resume state ({type(err).__name__}: {err})") from err
    return state
