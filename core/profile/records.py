"""What a memory profile holds: per step, the live bytes and the tensors alive, and the peak step.

Plain dataclasses with `to_dict` / `from_dict`, so a profile crosses a process boundary as JSON
and is exported as JSON unchanged.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

MODES = ("eager", "engine")


@dataclass(frozen=True)
class AliveTensor:
    """One value held after a step: the node that made it, its layer, shape and bytes."""

    node: str  # fx node name (unique in the graph)
    layer: str  # the module's qualified name, or the function called
    shape: tuple[int, ...]
    dtype: str
    nbytes: int  # bytes of its storage (views of one storage count once, on the first holder)


@dataclass(frozen=True)
class ProfileStep:
    """One graph node run: bytes held after it (dead inputs freed) and while it ran."""

    index: int
    node: str  # fx node name
    layer: str  # module qualified name (e.g. encoder.blocks.3.expand.0) or function name
    live_bytes: int  # held after the step, values read for the last time freed
    peak_bytes: int  # held while it ran: inputs + output + hidden temporaries (workspace)
    workspace_bytes: int  # hidden temporaries: conv reorder buffers, band pieces
    alive: tuple[AliveTensor, ...]  # what `live_bytes` is made of (after the step)
    running: tuple[AliveTensor, ...] = ()  # what was held while it ran, workspace aside


@dataclass
class MemoryProfile:
    """The per-step memory of one model at one input size, for eager PyTorch or the engine's plan."""

    mode: str  # eager | engine
    input_shape: tuple[int, ...]  # (1, C, H, W)
    dtype: str  # float32 | bfloat16
    steps: list[ProfileStep] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown profile mode {self.mode!r}; valid: {', '.join(MODES)}")

    @property
    def peak_index(self) -> int:
        """Index of the step that sets the peak (the first one, on ties); -1 when empty."""
        if not self.steps:
            return -1
        return max(range(len(self.steps)), key=lambda i: (self.steps[i].peak_bytes, -i))

    @property
    def peak_bytes(self) -> int:
        return self.steps[self.peak_index].peak_bytes if self.steps else 0

    @property
    def peak_step(self) -> ProfileStep | None:
        return self.steps[self.peak_index] if self.steps else None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        peak = self.peak_step
        data["peak_bytes"] = self.peak_bytes
        data["peak_index"] = self.peak_index
        data["peak_layer"] = peak.layer if peak else ""
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MemoryProfile:
        def tensors(items: list[dict[str, Any]]) -> tuple[AliveTensor, ...]:
            return tuple(AliveTensor(**{**t, "shape": tuple(t["shape"])}) for t in items)

        steps = [ProfileStep(**{**s, "alive": tensors(s["alive"]), "running": tensors(s.get("running", []))})
                 for s in data["steps"]]
        return cls(data["mode"], tuple(data["input_shape"]), data["dtype"], steps, list(data.get("notes", [])))


@dataclass
class LowerBounds:
    """The fewest bytes that must be alive at once (fp32, every value freed at its last use)."""

    whole_bytes: int  # blocks run whole: each step's inputs and output alive together
    pieces_bytes: int  # inverted residuals and the head in pieces of vanishing size
    whole_step: str  # the layer that sets each bound
    pieces_step: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def write_json(path: str | Path, payload: dict[str, Any]) -> Path:
    """Write `payload` as indented JSON, atomically (a temporary file renamed); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(payload, indent=1))
    partial.replace(path)
    return path
