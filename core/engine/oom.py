"""Out-of-memory recovery: recognise the error, give the memory back, decide what to try next.

The tiler catches the error, leaves the `except` block (so the traceback no longer pins the
tile's tensors), calls `release_memory`, and asks `next_attempt` for a smaller tile or the CPU.
`FaultInjection` is the test hook: it raises the error at a chosen executor step of a chosen
tile attempt, so the whole path runs on a CPU-only machine.
"""
from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn


class OutOfMemory(RuntimeError):
    """Memory ran out even at the smallest tile on the CPU; the message says what was tried."""


def is_out_of_memory(error: BaseException) -> bool:
    """True for torch.cuda.OutOfMemoryError, MemoryError, and allocator 'out of memory' RuntimeErrors."""
    if isinstance(error, (MemoryError, torch.cuda.OutOfMemoryError)):
        return True
    return isinstance(error, RuntimeError) and "out of memory" in str(error).lower()


def release_memory(device: torch.device) -> None:
    """Collect garbage and hand the CUDA cache back, so the retry starts from what is truly live."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()


@dataclass(frozen=True)
class NextAttempt:
    action: str  # 'smaller' (retry with tile_px) | 'cpu' (retry on the CPU at the same tile size)
    tile_px: int
    message: str


def next_attempt(device: torch.device, failed_tile_px: int, min_tile_px: int, stride: int,
                 can_fall_back: bool) -> NextAttempt:
    """Halve the tile (stride-aligned) while it stays >= min_tile_px; then the CPU; then OutOfMemory."""
    half = (failed_tile_px // 2) // stride * stride
    if half >= min_tile_px:
        return NextAttempt("smaller", half, f"out of memory on {device} with {failed_tile_px} px tiles; "
                                             f"retrying with {half} px tiles")
    if device.type != "cpu" and can_fall_back:
        return NextAttempt("cpu", failed_tile_px, f"out of memory on {device} even with {failed_tile_px} px tiles; "
                                                  "falling back to the CPU")
    raise OutOfMemory(f"out of memory on {device} even with the smallest tile ({failed_tile_px} px); "
                      "close other programs, or lower --memory-budget to start with smaller tiles")


@dataclass
class FaultInjection:
    """Test hook: raise `error` at executor step `at_step` of the tile attempts listed (0-based).

    The tile runner calls `begin_attempt()` as it starts each tile, then `on_step` after each
    executor step (Plan.run's on_step callback; forward hooks on the eager model's leaf modules).
    """

    at_attempts: frozenset[int]  # which tile attempts fail, counting retries
    at_step: int = 0  # which executor step inside a failing attempt raises
    error: Callable[[str], BaseException] = MemoryError  # e.g. torch.cuda.OutOfMemoryError
    attempts: int = -1  # attempts begun so far, minus one
    raised: list[int] = field(default_factory=list)  # the attempts that raised
    steps: int = 0  # executor steps seen in the current attempt

    def begin_attempt(self) -> None:
        self.attempts += 1
        self.steps = 0

    def on_step(self, name: str = "", live_bytes: int = 0) -> None:
        step, self.steps = self.steps, self.steps + 1
        if self.attempts in self.at_attempts and step == self.at_step:
            self.raised.append(self.attempts)
            raise self.error(f"injected out-of-memory at step {step} ({name}) of attempt {self.attempts}")

    def hook_eager(self, model: nn.Module) -> Callable[[], None]:
        """Call on_step after every leaf module of an eager model; returns the function that unhooks."""
        handles = [m.register_forward_hook(lambda *_: self.on_step())
                   for m in model.modules() if not list(m.children())]

        def remove() -> None:
            for handle in handles:
                handle.remove()

        return remove
