"""Exact accounting of the bytes a plan holds: per storage reference counts, per step records."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import torch


def tensors_in(value: object) -> Iterator[torch.Tensor]:
    """Every tensor in a value (tensors, and lists/tuples/dicts of them)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from tensors_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from tensors_in(item)


def storage_key(tensor: torch.Tensor) -> int:
    """One key per underlying storage, shared by all views of it (works for meta tensors too)."""
    return int(tensor.untyped_storage()._cdata)


class LiveAccount:
    """Bytes in storages the plan holds; views of one storage count once; caller's tensors not at all."""

    def __init__(self) -> None:
        self.live_bytes = 0
        self._refs: dict[int, list[int]] = {}  # storage key -> [references, nbytes]
        self._external: set[int] = set()

    def mark_external(self, tensor: torch.Tensor) -> None:
        """The caller owns this storage (the input image): never counted, never overwritten."""
        self._external.add(storage_key(tensor))

    def is_external(self, tensor: torch.Tensor) -> bool:
        return storage_key(tensor) in self._external

    def hold(self, value: object) -> None:
        for tensor in tensors_in(value):
            key = storage_key(tensor)
            entry = self._refs.get(key)
            if entry is not None:
                entry[0] += 1
                continue
            nbytes = 0 if key in self._external else int(tensor.untyped_storage().nbytes())
            self._refs[key] = [1, nbytes]
            self.live_bytes += nbytes

    def release(self, value: object) -> None:
        for tensor in tensors_in(value):
            self.release_storage(storage_key(tensor))

    def release_storage(self, key: int) -> None:
        """Drop one reference to the storage `key` (from `storage_key`), when its tensor is already gone."""
        entry = self._refs[key]
        entry[0] -= 1
        if entry[0] == 0:
            self.live_bytes -= entry[1]
            del self._refs[key]

    def references(self, tensor: torch.Tensor) -> int:
        """How many held values refer to this tensor's storage."""
        entry = self._refs.get(storage_key(tensor))
        return entry[0] if entry else 0

    def may_overwrite(self, tensor: torch.Tensor) -> bool:
        """A step may write its result into `tensor`: not the caller's, and held by one value only."""
        return not self.is_external(tensor) and self.references(tensor) == 1


@dataclass(frozen=True)
class StepRecord:
    name: str  # the graph node (a layer's qualified name, or the function called)
    live_bytes: int  # bytes held after the step, dead inputs freed
    peak_bytes: int  # bytes held while the step ran: inputs + output + its own temporaries


@dataclass
class RunStats:
    """What one `Plan.run` held, step by step. Bytes exclude the caller's input tensor."""

    input_shape: tuple[int, ...]
    steps: list[StepRecord] = field(default_factory=list)
    peak_bytes: int = 0  # the highest `peak_bytes` of any step
    peak_step: str = ""  # the step that set it
    seconds: float = 0.0

    def record(self, name: str, live_bytes: int, peak_bytes: int) -> None:
        self.steps.append(StepRecord(name, live_bytes, peak_bytes))
        if peak_bytes > self.peak_bytes:
            self.peak_bytes, self.peak_step = peak_bytes, name
