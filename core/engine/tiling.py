"""Run a tiling plan: read each tile with its halo, run it, keep its core; events, cancel, OOM recovery.

The tiler knows nothing of models: it takes a per-tile runner, (1, C, h, w) -> logits (1, K, h, w)
or labels (1, h, w), which is the eager model today and `Plan.run` where the engine is used.
"""
from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import psutil
import torch
from torch import Tensor

from ..events import EventSink, JobCancelled, JobEvent, ignore_event
from ..memory import engine_live_bytes, format_bytes
from .oom import FaultInjection, is_out_of_memory, next_attempt, release_memory
from .tile_plan import FAST_HALO_STRIDES, MIN_TILE_STRIDES, Box, TilingPlan, grow_box, reads_within, split_box

TileRunner = Callable[[Tensor], Tensor]  # (1, C, h, w) -> logits (1, K, h, w) float, or labels (1, h, w) int
TileSource = Callable[[Box], Tensor]  # read box -> (1, C, h, w) float32 model input (CPU is fine)
TileSink = Callable[[Box, Tensor], None]  # core box, the output there: logits (K, h, w) or labels (h, w)


@dataclass
class TilingOutcome:
    """What a tiled run did; `notes` are the lines a user should see."""

    plan: TilingPlan
    tile_shape: tuple[int, int]  # the tile core (rows, columns) that finished the image (smaller after an OOM)
    device: str  # where the last tile ran ('cpu' after a fallback)
    tiles_run: int = 0
    attempts: int = 0  # tile runs started, failed ones included
    tile_peak_bytes: int = 0  # the largest tile's peak, in the measure `measure` names
    measure: str = ""  # what the peaks count (engine tensors, CUDA allocated, process RSS); 'mixed' when tiles differ
    notes: list[str] = field(default_factory=list)  # recovery steps (an OOM's smaller tiles, a CPU fallback)

    @property
    def user_notes(self) -> list[str]:
        """The plan, then any recovery steps: what a summary shows of the run."""
        return [self.plan.describe(), *self.notes]


def run_tiles(
    plan: TilingPlan,
    source: TileSource,
    sink: TileSink,
    runner: TileRunner,
    *,
    device: torch.device,
    cancel: threading.Event | None = None,
    on_event: EventSink = ignore_event,
    cpu_runner: Callable[[], TileRunner] | None = None,
) -> TilingOutcome:
    """Run every tile of `plan`, row by row; checks `cancel` before each tile (raises JobCancelled).

    On out-of-memory the tile's memory is released and the tile retried at half the size (down to
    MIN_TILE_STRIDES strides), then on the CPU via `cpu_runner`; a whole-image plan that fails continues as
    exact tiles (fast ones for a model with no bounded receptive field). Each step is announced as a 'warning'
    event and kept in `notes`.
    """
    outcome = TilingOutcome(plan, plan.tile_shape, str(device))
    queue: deque[Box] = deque(tile.core for tile in plan.tiles())
    tile_shape, halo_px, mode = plan.tile_shape, plan.halo_px, plan.mode
    min_tile_px = MIN_TILE_STRIDES * plan.stride
    while queue:
        if cancel is not None and cancel.is_set():
            raise JobCancelled()
        core = queue.popleft()
        if core[1] - core[0] > tile_shape[0] or core[3] - core[2] > tile_shape[1]:
            queue.extendleft(reversed(split_box(core, tile_shape)))
            continue
        outcome.attempts += 1
        _reset_tile_peak(device)
        failure = ""
        try:
            _run_one(core, grow_box(core, halo_px, plan.height, plan.width), source, sink, runner)
        except Exception as err:  # noqa: BLE001 - only out-of-memory is handled, the rest re-raised
            if not is_out_of_memory(err):
                raise
            failure = f"{type(err).__name__}: {err}"
        if failure:  # outside the except block: the traceback no longer pins the tile's tensors
            release_memory(device)
            failed_px = min(max(tile_shape), _aligned(max(core[1] - core[0], core[3] - core[2]), plan.stride))
            attempt = next_attempt(device, failed_px, min_tile_px, plan.stride, cpu_runner is not None)
            if attempt.action == "cpu":
                assert cpu_runner is not None
                runner, device = cpu_runner(), torch.device("cpu")
                outcome.device = "cpu"
            tile_shape = attempt.tile_px, attempt.tile_px  # square tiles from here on
            if mode == "whole" and plan.exact_halo_px is not None:
                mode, halo_px = "exact", plan.exact_halo_px
            elif mode == "whole":  # no bounded receptive field, or multi-scale averaging
                mode, halo_px = "fast", plan.fast_halo_px or FAST_HALO_STRIDES * plan.stride
            halo_before = halo_px
            tile_shape, halo_px = reads_within(tile_shape, halo_px, plan.stride, plan.max_read_px)
            mode = "fast" if halo_px < halo_before else mode  # the model's size range left no room for the halo
            outcome.notes.append(attempt.message)
            on_event(JobEvent("warning", attempt.message, data={"error": failure, "tile_px": attempt.tile_px,
                                                                "device": str(device), "halo_px": halo_px}))
            queue.appendleft(core)
            continue
        outcome.tiles_run += 1
        count = outcome.tiles_run + sum(len(split_box(box, tile_shape)) for box in queue)
        live, measure = _tile_peak(device)
        outcome.tile_peak_bytes = max(outcome.tile_peak_bytes, live)
        # a tile measured otherwise (an eager fallback's RSS): no single measure to name
        outcome.measure = measure if outcome.tiles_run == 1 or measure == outcome.measure else "mixed"
        on_event(JobEvent("tile", f"tile {outcome.tiles_run}/{count}" + (f", {format_bytes(live)}" if live else ""),
                          index=outcome.tiles_run - 1, count=count, live_bytes=live,
                          data={"core": core, "tile_shape": tile_shape, "halo_px": halo_px, "device": str(device),
                                "measure": measure}))
    outcome.tile_shape = tile_shape
    return outcome


def _run_one(core: Box, read: Box, source: TileSource, sink: TileSink, runner: TileRunner) -> None:
    output = runner(source(read))  # (1, K, h, w) or (1, h, w)
    top, left = core[0] - read[0], core[2] - read[2]
    sink(core, output[0][..., top:top + core[1] - core[0], left:left + core[3] - core[2]])


def _aligned(pixels: int, stride: int) -> int:
    return -(-pixels // stride) * stride


def _reset_tile_peak(device: torch.device) -> None:
    engine_live_bytes.reset_peak()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def _tile_peak(device: torch.device) -> tuple[int, str]:
    """The tile's peak and what it counts: CUDA allocated, else the engine's live tensors (its gauge), else the
    process RSS (the eager engine)."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device)), "CUDA allocated"
    if engine_live_bytes.peak > 0:
        return engine_live_bytes.peak, "engine tensors"
    return int(psutil.Process().memory_info().rss), "process RSS"


# --- in-memory images -------------------------------------------------------------------------

def array_source(pixels: np.ndarray, to_input: Callable[[np.ndarray], np.ndarray]) -> TileSource:
    """Tiles of an (H, W[, C]) pixel array, normalised one tile at a time by `to_input` -> (C, h, w)."""

    def read(box: Box) -> Tensor:
        top, bottom, left, right = box
        return torch.from_numpy(to_input(pixels[top:bottom, left:right]))[None]

    return read


class ArraySink:
    """Writes tile outputs into preallocated arrays: labels (H, W) uint8, optional probs / logits (K, H, W)."""

    def __init__(self, labels: np.ndarray, probs: np.ndarray | None = None, logits: np.ndarray | None = None) -> None:
        self.labels = labels
        self.probs = probs
        self.logits = logits

    def __call__(self, core: Box, output: Tensor) -> None:
        top, bottom, left, right = core
        if output.dim() == 2:  # labels
            self.labels[top:bottom, left:right] = output.cpu().numpy()
            return
        scores = output.float()
        self.labels[top:bottom, left:right] = scores.argmax(0).to(torch.uint8).cpu().numpy()
        if self.probs is not None:
            self.probs[:, top:bottom, left:right] = scores.softmax(0).cpu().numpy()
        if self.logits is not None:
            self.logits[:, top:bottom, left:right] = scores.cpu().numpy()


def eager_runner(model: torch.nn.Module, device: torch.device, bf16: bool = False,
                 injection: FaultInjection | None = None, cancel: threading.Event | None = None) -> TileRunner:
    """Plain PyTorch per tile: (1, C, h, w) -> logits (1, K, h, w) float32 on the device.

    With `cancel`, the tile stops (JobCancelled) after the first leaf module that finds it set."""

    def run(x: Tensor) -> Tensor:
        unhook = None
        if injection is not None:
            injection.begin_attempt()
            unhook = injection.hook_eager(model)
        handles = [m.register_forward_hook(lambda *_: _raise_if_set(cancel))
                   for m in model.modules() if not list(m.children())] if cancel is not None else []
        try:
            with torch.inference_mode(), torch.autocast(device.type, torch.bfloat16, enabled=bf16):
                return model(x.to(device)).float()
        finally:
            if unhook is not None:
                unhook()
            for handle in handles:
                handle.remove()

    return run


def plan_runner(plan: object, output: str = "labels", injection: FaultInjection | None = None,
                cancel: threading.Event | None = None) -> TileRunner:
    """The engine's Plan.run per tile; the injection hook and the `cancel` check ride on its per-step callback
    (a set `cancel` stops the tile with JobCancelled after the step in flight)."""

    def on_step(name: str = "", live_bytes: int = 0) -> None:
        if injection is not None:
            injection.on_step(name, live_bytes)
        if cancel is not None:
            _raise_if_set(cancel)

    def run(x: Tensor) -> Tensor:
        if injection is not None:
            injection.begin_attempt()
        result: Tensor = plan.run(x, output=output, on_step=on_step)  # type: ignore[attr-defined]
        return result

    return run


def _raise_if_set(cancel: threading.Event) -> None:
    if cancel.is_set():
        raise JobCancelled()
