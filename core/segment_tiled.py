"""Glue between a Segmenter and the tiler: plan the tiles for an image, pick the runner, run it.

Every Segmenter.segment goes through here: a whole-image pass is a one-tile plan, so the
out-of-memory recovery (smaller tiles, then the CPU) covers it too.
"""
from __future__ import annotations

import copy
import dataclasses
import math
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from .engine.eager_peak import eager_peak_estimator
from .engine.mirror import canvas_width, cropped_sink, mirror_extra_bytes, mirror_runner, padded_source
from .engine.multiscale import EXACT_WITH_SCALES, multiscale_extra_bytes, multiscale_runner, scaled_size
from .engine.oom import FaultInjection
from .engine.receptive_field import ReceptiveField, ReceptiveFieldError, compute_receptive_field
from .engine.tile_budget import DEFAULT_MAX_TILE_BYTES, default_budget
from .engine.tile_plan import FAST_HALO_STRIDES, MIN_TILE_STRIDES, BudgetTooSmallError, TilingPlan, choose_tiling
from .engine.tiling import (
    ArraySink,
    TileRunner,
    TileSink,
    TileSource,
    TilingOutcome,
    array_source,
    eager_runner,
    plan_runner,
    run_tiles,
)
from .events import EventSink, JobEvent, ignore_event
from .io.images import ImageData, to_model_input
from .memory import format_bytes
from .model.checkpoint import ModelInfo


class TilingOptions(Protocol):
    """The inference options the tiler reads (leanseg.core.predict.InferenceOptions has them)."""

    @property
    def precision(self) -> str: ...
    @property
    def memory_budget(self) -> int | None: ...
    @property
    def tiling(self) -> str: ...
    @property
    def want_probs(self) -> bool: ...
    @property
    def mirror(self) -> str: ...
    @property
    def scales(self) -> tuple[float, ...]: ...
    @property
    def multiscale(self) -> bool: ...


class Segmenter(Protocol):
    """What the tiler reads of a leanseg.core.predict.Segmenter, named here so this module need not import it
    (predict imports this one); its optional `plan` and `fault_injection` are read with getattr."""

    @property
    def model(self) -> torch.nn.Module: ...
    @property
    def device(self) -> torch.device: ...
    @property
    def info(self) -> ModelInfo: ...
    @property
    def options(self) -> TilingOptions: ...

_fields: weakref.WeakKeyDictionary[torch.nn.Module, ReceptiveField | str] = weakref.WeakKeyDictionary()
_estimators: weakref.WeakKeyDictionary[torch.nn.Module, dict[bool, Callable[[tuple[int, ...]], int]]] = \
    weakref.WeakKeyDictionary()  # model -> {bf16: its eager peak estimator}


def receptive_field_of(model: torch.nn.Module) -> ReceptiveField | str:
    """The model's receptive field, or why it has none (computed once per model)."""
    if model not in _fields:
        try:
            _fields[model] = compute_receptive_field(model)
        except (ReceptiveFieldError, torch.fx.proxy.TraceError) as err:
            _fields[model] = f"cannot tile exactly: {err}"
    return _fields[model]


def runner_for(segmenter: Segmenter, output: str = "logits", cancel: threading.Event | None = None) -> TileRunner:
    """(1, C, h, w) -> logits (1, K, h, w) or labels (1, h, w): the engine's plan when compiled, else eager.

    With `cancel`, a tile in flight stops (JobCancelled) at the next engine step or eager module once it is set.
    With mirror averaging on, each tile runs twice (as is and mirrored) for logits, averaged; with several scales,
    once (or twice) per scale, the class probabilities averaged."""
    injection = getattr(segmenter, "fault_injection", None)
    plan = getattr(segmenter, "plan", None)
    augmented = segmenter.options.mirror == "flip" or segmenter.options.multiscale
    if plan is not None:
        runner = plan_runner(plan, "logits" if augmented else output, injection, cancel=cancel)
    else:
        runner = eager_runner(segmenter.model, segmenter.device, segmenter.options.precision == "bf16", injection,
                              cancel=cancel)
    return _augmented(runner, segmenter.options, output)


def _augmented(runner: TileRunner, options: TilingOptions, output: str) -> TileRunner:
    """A logits runner wrapped in the options' test-time augmentation (mirror inside each scale's pass)."""
    if options.mirror == "flip":
        runner = mirror_runner(runner, "logits" if options.multiscale else output)
    return multiscale_runner(runner, options.scales, output) if options.multiscale else runner


def cpu_runner_for(segmenter: Segmenter) -> Callable[[], TileRunner] | None:
    """A factory for an eager CPU runner on a copy of the model (None when already on the CPU)."""
    if segmenter.device.type == "cpu":
        return None

    def make() -> TileRunner:
        model = copy.deepcopy(segmenter.model).float().cpu()
        runner = eager_runner(model, torch.device("cpu"), injection=getattr(segmenter, "fault_injection", None))
        return _augmented(runner, segmenter.options, "logits")

    return make


def estimate_tile_bytes(segmenter: Segmenter, height: int, width: int, output: str = "logits") -> int:
    """Predicted peak bytes of one (height, width) tile: the model's run plus its normalised float input (with
    mirror averaging: a logits run plus the second pass's extra logits and input; with several scales: the
    largest scale's pass, plus the running mean and the resized copies)."""
    options = segmenter.options
    num_classes, channels = segmenter.info.config.num_classes, segmenter.info.config.in_channels
    plan = getattr(segmenter, "plan", None)
    extra_bytes = 0
    run_height, run_width = height, width
    if options.multiscale:
        output = "logits"
        run_height, run_width = scaled_size(height, width, max(options.scales))
        extra_bytes += multiscale_extra_bytes(num_classes, channels, height, width, max(options.scales))
    if options.mirror == "flip":
        output = "logits"
        extra_bytes += mirror_extra_bytes(num_classes, channels, run_height, run_width)
    if plan is not None:
        run_bytes = int(plan.estimate_peak((1, channels, run_height, run_width), output=output))
    else:
        bf16 = options.precision == "bf16"
        by_precision = _estimators.setdefault(segmenter.model, {})
        if bf16 not in by_precision:
            by_precision[bf16] = eager_peak_estimator(segmenter.model, channels, bf16)
        run_bytes = by_precision[bf16]((1, channels, run_height, run_width))
    return run_bytes + extra_bytes + channels * height * width * 4  # + the float input, which the plan omits


def plan_tiles(segmenter: Segmenter, height: int, width: int, output: str = "logits", *,
               mode: str | None = None, budget_bytes: int | None = None, held_bytes: int = 0,
               image_width: int | None = None) -> TilingPlan:
    """Whole image or tiles, exact or fast, from the options (or the overrides), the budget and the estimate.

    `held_bytes`: what the job holds beside the tiles (the image and its output arrays); the budget covers both.
    `image_width`: the image's own width where `width` is the job's canvas (`job_width`), for the messages.
    """
    options = segmenter.options
    chosen = budget_bytes or options.memory_budget  # a budget someone gave is held, or refused
    budget = chosen or default_budget(segmenter.device)
    field = receptive_field_of(segmenter.model)
    mode = mode or options.tiling
    if isinstance(field, str) and mode == "exact":
        raise ValueError(f"--tiling exact is impossible for this model ({field}); use fast or off")
    stride, exact_halo = _stride_and_exact_halo(segmenter.model, field)
    fast_halo = _fast_halo(options, stride, exact_halo)
    if options.multiscale:
        if mode == "exact":
            raise ValueError(EXACT_WITH_SCALES)
        exact_halo = None  # tiles, when needed, are fast ones
    plan = choose_tiling(height, width, mode=mode, budget_bytes=budget, stride=stride, exact_halo_px=exact_halo,
                         fast_halo_px=fast_halo, held_bytes=held_bytes,
                         max_tile_bytes=None if chosen else DEFAULT_MAX_TILE_BYTES, refuse_over_budget=bool(chosen),
                         tile_bytes=lambda h, w: estimate_tile_bytes(segmenter, h, w, output),
                         image_width=image_width if image_width != width else None,
                         max_read_px=_max_read_px(segmenter, stride))
    return dataclasses.replace(plan, why_approximate="multi-scale averaging") if options.multiscale else plan


def _max_read_px(segmenter: Segmenter, stride: int) -> tuple[int, int] | None:
    """The largest (rows, columns) a tile may read, halo included, for a model exported for a bounded size range
    (0: any side); with multi-scale averaging a tile runs enlarged by the largest scale, so it reads less. None:
    any size."""
    max_size = getattr(segmenter.model, "max_size", (0, 0))
    if not any(max_size):
        return None
    largest = max(segmenter.options.scales)
    return tuple(max(stride, int(side / largest) // stride * stride) if side else 0  # type: ignore[return-value]
                 for side in max_size)


def job_width(segmenter: Segmenter, width: int) -> int:
    """The width the tiles are planned on: with mirror averaging, the image's padded on the right to the tiling
    stride (see leanseg.core.engine.mirror), which keeps exact tiles exact; else, and with multi-scale averaging
    (whose tiles are never exact, and whose resized passes would blend the padding into the image), the image's."""
    if segmenter.options.mirror != "flip" or segmenter.options.multiscale:
        return width
    stride, _ = _stride_and_exact_halo(segmenter.model, receptive_field_of(segmenter.model))
    return canvas_width(width, stride)


def canvas_io(segmenter: Segmenter, width: int, source: TileSource, sink: TileSink) -> tuple[TileSource, TileSink]:
    """Source and sink over the job's canvas: zeros read right of the image's `width`, and not written."""
    if job_width(segmenter, width) == width:
        return source, sink
    return padded_source(source, width), cropped_sink(sink, width)


def _fast_halo(options: TilingOptions, stride: int, exact_halo: int | None) -> int:
    """The fast tiles' halo: FAST_HALO_STRIDES strides; with multi-scale averaging over the smallest scale (at 0.5x
    a pass sees twice as far in the image), and no wider than the receptive field so widened."""
    if not options.multiscale:
        return FAST_HALO_STRIDES * stride
    widen = 1 / min(min(options.scales), 1.0)
    halo = math.ceil(FAST_HALO_STRIDES * widen) * stride
    return halo if exact_halo is None else min(halo, math.ceil(exact_halo * widen / stride) * stride)


def _stride_and_exact_halo(model: torch.nn.Module, field: ReceptiveField | str) -> tuple[int, int | None]:
    """Tile alignment and exact halo; a model with no bounded field (`field` says why) has no exact halo."""
    if isinstance(field, str):
        return int(getattr(model, "total_stride", 32)), None
    return field.total_stride, field.aligned_halo_px


def check_budget(segmenter: Segmenter, output: str = "labels") -> None:
    """BudgetTooSmallError when the given --memory-budget cannot hold the smallest tile of any image
    (MIN_TILE_STRIDES strides square plus the halo); checked once, before any image is read."""
    budget = segmenter.options.memory_budget
    if budget is None or segmenter.options.tiling == "off":
        return
    stride, exact_halo = _stride_and_exact_halo(segmenter.model, receptive_field_of(segmenter.model))
    fast_halo = _fast_halo(segmenter.options, stride, exact_halo)
    halo = fast_halo if exact_halo is None or segmenter.options.multiscale else exact_halo  # else fast tiles
    if segmenter.options.tiling == "fast":
        halo = min(halo, fast_halo)
    side = MIN_TILE_STRIDES * stride + 2 * halo
    smallest = estimate_tile_bytes(segmenter, side, side, output)
    if budget < smallest:
        raise BudgetTooSmallError(
            f"--memory-budget {format_bytes(budget)} is below what the smallest tile needs: {format_bytes(smallest)} "
            f"for {MIN_TILE_STRIDES * stride}x{MIN_TILE_STRIDES * stride} px + halo {halo} px, before the image "
            f"itself; give at least {format_bytes(smallest)} plus the image's size")


def plan_event(plan: TilingPlan) -> JobEvent:
    """The 'plan' job event: what the tiler chose and why."""
    rows, cols = plan.grid
    return JobEvent("plan", plan.describe(), count=rows * cols,
                    data={"mode": plan.mode, "grid": [rows, cols], "tile_shape": list(plan.tile_shape),
                          "halo_px": plan.halo_px, "exact_halo_px": plan.exact_halo_px, "tile_bytes": plan.tile_bytes,
                          "budget_bytes": plan.budget_bytes, "held_bytes": plan.held_bytes})


@dataclass
class TiledResult:
    labels: np.ndarray  # (H, W) uint8
    probs: np.ndarray | None  # (K, H, W) float32 when asked for
    tiling: TilingOutcome  # where the last tile ran ('cpu' after an out-of-memory fallback), its tiles, their peak


def segment_in_tiles(
    segmenter: Segmenter,
    image: ImageData,
    *,
    cancel: threading.Event | None = None,
    on_event: EventSink = ignore_event,
) -> TiledResult:
    """Labels (H, W) uint8, probs (K, H, W) float32 when asked for, and what the tiler did."""
    info = segmenter.info
    want_probs = segmenter.options.want_probs
    output = "logits" if want_probs else "labels"
    labels = np.zeros((image.height, image.width), np.uint8)
    probs = np.zeros((info.config.num_classes, image.height, image.width), np.float32) if want_probs else None
    held = image.pixels.nbytes + labels.nbytes + (probs.nbytes if probs is not None else 0)
    source = array_source(image.pixels, lambda pixels: to_model_input(
        image.like(pixels), info.config.in_channels, info.mean, info.std))
    source, sink = canvas_io(segmenter, image.width, source, ArraySink(labels, probs))
    plan = plan_tiles(segmenter, image.height, job_width(segmenter, image.width), output, held_bytes=held,
                      image_width=image.width)
    if plan.mode != "whole" or segmenter.options.tiling != "auto":
        on_event(plan_event(plan))
    outcome = run_tiles(plan, source, sink, runner_for(segmenter, output, cancel), device=segmenter.device,
                        cancel=cancel, on_event=on_event, cpu_runner=cpu_runner_for(segmenter))
    return TiledResult(labels, probs, outcome)


__all__ = [
    "BudgetTooSmallError",
    "FaultInjection",
    "check_budget",
    "cpu_runner_for",
    "estimate_tile_bytes",
    "canvas_io",
    "job_width",
    "plan_event",
    "plan_tiles",
    "receptive_field_of",
    "runner_for",
    "segment_in_tiles",
    "TiledResult",
]
