"""Activation checkpointing, planned from a cost model or applied to every block.

A model is cut into segments (a MobileUNet encoder block or decoder stage; a PlainUNet level with
its max-pool, an up stage, the last up stage in two halves). Each segment runs plain or under
non-reentrant `torch.utils.checkpoint`. The plan measures, on one sample batch, the bytes each
segment saves for backward (saved_tensors_hooks) and its forward time, then recomputes the
segments that free the most bytes per second of recomputation until the estimated peak of a
training step is at most `target` x plain training's. The expensive low-resolution blocks, and the
last segment (recomputed at once when backward starts, so checkpointing it frees nothing at the
peak), stay plain.
"""
from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from ..model import padding
from ..model.blocks import ConvBNAct, InvertedResidual
from ..model.mobile_unet import DecoderStage
from ..model.plain_unet import DoubleConv, PlainUNet, UpStage

EVERY_BLOCK = (InvertedResidual, DecoderStage, DoubleConv, UpStage)  # the plain "every block" mode
PLANNED_BLOCKS = (*EVERY_BLOCK, ConvBNAct)  # segments of a planned model without its own cut
DEFAULT_TARGET = 0.45  # estimated peak / plain peak the plan aims at (the bar is 0.5)
GRAD_WORKSPACE = 0.2  # a segment's backward holds its saved bytes plus about this share in gradients


@dataclass(frozen=True)
class SegmentCost:
    name: str
    saved_bytes: int  # what its forward saves for backward, less its inputs, output and weights
    seconds: float  # its forward time on the sample batch


@dataclass(frozen=True)
class CheckpointPlan:
    segments: tuple[SegmentCost, ...]  # forward order
    checkpointed: frozenset[str]  # names of the recomputed segments
    fixed_bytes: int  # saved outside segments, segment outputs and weight gradients: same either way
    estimated_peak_share: float  # estimated step peak / plain step peak
    recomputed_share: float  # recomputed forward time / forward time of all segments

    def summary(self) -> str:
        return (f"activation checkpointing: {len(self.checkpointed)} of {len(self.segments)} segments "
                f"recomputed ({self.recomputed_share:.0%} of their forward time), estimated peak "
                f"{self.estimated_peak_share:.2f}x plain")


@dataclass
class _Runner:
    """Runs each named segment plain or checkpointed; while `costs` is a dict, measures them."""

    norms: list[nn.modules.batchnorm._BatchNorm]  # left alone while a segment is recomputed
    checkpointed: set[str] = field(default_factory=set)
    costs: dict[str, SegmentCost] | None = None
    outputs: dict[int, int] = field(default_factory=dict)  # storage -> bytes of segment outputs
    weights: set[int] = field(default_factory=set)

    def __call__(self, name: str, fn: Callable[..., Tensor], *args: Tensor) -> Tensor:
        if self.costs is not None:
            return self._measure(name, fn, *args)
        if name in self.checkpointed:
            return _checkpointed(self.norms, fn, *args)
        return fn(*args)

    def _measure(self, name: str, fn: Callable[..., Tensor], *args: Tensor) -> Tensor:
        assert self.costs is not None
        kept = {t.untyped_storage().data_ptr() for t in args if isinstance(t, Tensor)} | self.weights
        saved: dict[int, int] = {}

        def pack(t: Tensor) -> Tensor:
            storage = t.untyped_storage()
            saved[storage.data_ptr()] = storage.nbytes()
            return t

        _sync(args[0])
        start = time.perf_counter()
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = fn(*args)
        _sync(out)
        seconds = time.perf_counter() - start
        kept.add(out.untyped_storage().data_ptr())
        saved_bytes = sum(n for ptr, n in saved.items() if ptr not in kept)
        previous = self.costs.get(name)
        if previous is not None:  # called again (a second calibration pass): keep the faster time
            seconds = min(seconds, previous.seconds)
        self.costs[name] = SegmentCost(name, saved_bytes, seconds)
        self.outputs[out.untyped_storage().data_ptr()] = out.untyped_storage().nbytes()
        return out.detach().requires_grad_(out.requires_grad)  # drop its graph: one segment at a time


def _sync(t: Tensor) -> None:
    if t.is_cuda:
        torch.cuda.synchronize(t.device)


def enable_activation_checkpointing(model: nn.Module, sample_input: Tensor | None = None,
                                    target: float = DEFAULT_TARGET) -> int:
    """Checkpoint segments of `model`; returns how many. Weights and state_dict keys are unchanged.

    Without `sample_input`: every block (InvertedResidual, DecoderStage, DoubleConv, UpStage),
    outermost only. With a sample batch (B, C, H, W) like the training batches: the segments that
    `plan_activation_checkpointing` picks for an estimated peak of `target` x plain.
    """
    if sample_input is None:
        return _wrap_every_block(model)
    return len(plan_activation_checkpointing(model, sample_input, target).checkpointed)


def plan_activation_checkpointing(model: nn.Module, sample_input: Tensor, target: float = DEFAULT_TARGET,
                                  checkpointed: Collection[str] | None = None) -> CheckpointPlan:
    """Cut `model` into segments, measure them on `sample_input` (B, C, H, W), checkpoint a cheap
    set whose estimated step peak is at most `target` x plain (or the segments named in
    `checkpointed`, e.g. another process's plan). BatchNorm running statistics are left as they
    were. The calibration holds one segment's saved tensors at a time."""
    if not 0.0 < target <= 1.0:
        raise ValueError(f"target must be in (0, 1], got {target}")
    runner = _Runner(_batch_norms(model), weights={p.untyped_storage().data_ptr() for p in model.parameters()})
    _install_segments(model, runner)
    buffers = {name: b.clone() for name, b in model.named_buffers()}
    was_training = model.training
    model.train()  # what a training step saves: BatchNorm with batch statistics
    runner.costs = {}
    outside: dict[int, int] = {}

    def pack_outside(t: Tensor) -> Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in runner.weights:
            outside[storage.data_ptr()] = storage.nbytes()
        return t

    try:
        with torch.enable_grad():
            for _ in range(2):  # the first pass warms up kernels; times are the faster of two
                runner.outputs.clear()
                outside.clear()
                with torch.autograd.graph.saved_tensors_hooks(pack_outside, lambda t: t):
                    model(sample_input)
        costs = tuple(runner.costs.values())  # forward order: dicts keep first insertion
    finally:
        runner.costs = None
        model.train(was_training)
        with torch.no_grad():
            for name, b in model.named_buffers():
                b.copy_(buffers[name])
    weight_grads = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    fixed = sum({**outside, **runner.outputs}.values()) + weight_grads
    if checkpointed is not None:
        unknown = set(checkpointed) - {c.name for c in costs}
        if unknown:
            raise ValueError(f"no segments named {sorted(unknown)}; this model has {[c.name for c in costs]}")
    plan = _choose(costs, fixed, target, checkpointed)
    runner.checkpointed = set(plan.checkpointed)
    return plan


def _choose(costs: tuple[SegmentCost, ...], fixed: int, target: float,
            given: Collection[str] | None = None) -> CheckpointPlan:
    """Start from every segment recomputed; keep plain, most expensive per byte first, each segment
    whose plain run keeps the estimated peak within `target` x plain."""
    plain = _estimated_peak(costs, set(), fixed)
    chosen = {c.name for c in costs if c.saved_bytes > 0} if given is None else set(given)
    for cost in sorted(costs, key=lambda c: c.seconds / max(c.saved_bytes, 1), reverse=True):
        if given is not None or cost.name not in chosen:
            continue
        allowed = max(target * plain, _estimated_peak(costs, chosen, fixed))  # the last segment is free
        if _estimated_peak(costs, chosen - {cost.name}, fixed) <= allowed:
            chosen.discard(cost.name)
    total_seconds = sum(c.seconds for c in costs) or 1.0
    return CheckpointPlan(
        segments=costs, checkpointed=frozenset(chosen), fixed_bytes=fixed,
        estimated_peak_share=_estimated_peak(costs, chosen, fixed) / plain,
        recomputed_share=sum(c.seconds for c in costs if c.name in chosen) / total_seconds)


def _estimated_peak(costs: tuple[SegmentCost, ...], checkpointed: set[str], fixed: int) -> float:
    """Peak of a step: when segment b runs backward, the plain segments before it still hold their
    saved tensors, and b holds its own (kept or recomputed) plus gradients."""
    peak, held = 0.0, 0
    for cost in costs:
        peak = max(peak, held + (1 + GRAD_WORKSPACE) * cost.saved_bytes)
        if cost.name not in checkpointed:
            held += cost.saved_bytes
    return fixed + peak


def _mark_checkpointed(model: nn.Module) -> None:
    if getattr(model, "_leanseg_checkpointing", False):
        raise ValueError(f"activation checkpointing is already set up on this {type(model).__name__}")
    model._leanseg_checkpointing = True  # type: ignore[assignment]


def _install_segments(model: nn.Module, runner: _Runner) -> None:
    _mark_checkpointed(model)
    if isinstance(model, PlainUNet):
        model.forward = functools.partial(_plain_unet_forward, model, runner)  # type: ignore[method-assign]
        return
    covered: set[int] = set()
    for name, module in model.named_modules():
        if id(module) in covered or not isinstance(module, PLANNED_BLOCKS):
            continue
        covered.update(id(m) for m in module.modules())
        module.forward = functools.partial(runner, name, module.forward)  # type: ignore[method-assign]


def _plain_unet_forward(model: PlainUNet, run: _Runner, image: Tensor) -> Tensor:  # (B, K, H, W)
    """PlainUNet.forward cut into segments: each level with the max-pool before it (so the pool's
    indices are recomputed, not kept); the last up stage in two conv-BN-ReLU halves."""
    x = padding.pad_to_multiple(image, model.total_stride)
    skips = []
    for i, level in enumerate(model.down):
        x = run(f"down.{i}", functools.partial(_down_level, level, i > 0), x)
        skips.append(x)
    y = skips.pop()
    last = len(model.up) - 1
    for j, stage in enumerate(model.up):
        if j < last:
            y = run(f"up.{j}", stage, y, skips.pop())
        else:
            y = run(f"up.{j}.first", functools.partial(_up_first_half, stage), y, skips.pop())
            y = run(f"up.{j}.second", functools.partial(_conv_layers, stage.conv, 3, 6), y)  # type: ignore[arg-type]
    return padding.crop_like(model.head(y), image)


def _down_level(level: nn.Module, pool: bool, x: Tensor) -> Tensor:
    return level(F.max_pool2d(x, 2) if pool else x)


def _up_first_half(stage: nn.Module, x: Tensor, skip: Tensor) -> Tensor:
    x = F.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=False)
    return _conv_layers(stage.conv, 0, 3, torch.cat([x, skip], dim=1))  # type: ignore[arg-type]


def _conv_layers(layers: nn.Sequential, start: int, stop: int, x: Tensor) -> Tensor:
    for i in range(start, stop):
        x = layers[i](x)
    return x


def _wrap_every_block(model: nn.Module) -> int:
    _mark_checkpointed(model)
    wrapped, norms = 0, _batch_norms(model)
    covered: set[int] = set()
    for module in model.modules():
        if id(module) in covered or not isinstance(module, EVERY_BLOCK):
            continue
        covered.update(id(m) for m in module.modules())
        module.forward = functools.partial(_checkpointed, norms, module.forward)  # type: ignore[method-assign]
        wrapped += 1
    return wrapped


def _checkpointed(norms: list[nn.modules.batchnorm._BatchNorm], forward: Callable[..., Tensor],
                  *args: Tensor) -> Tensor:
    if not torch.is_grad_enabled():
        return forward(*args)
    contexts = functools.partial(_recompute_contexts, norms)
    return checkpoint(forward, *args, use_reentrant=False, context_fn=contexts)  # type: ignore[no-any-return]


def _batch_norms(model: nn.Module) -> list[nn.modules.batchnorm._BatchNorm]:
    return [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]


def _recompute_contexts(norms: list[nn.modules.batchnorm._BatchNorm]) -> tuple[contextlib.AbstractContextManager,
                                                                              contextlib.AbstractContextManager]:
    return contextlib.nullcontext(), _frozen_running_stats(norms)


@contextlib.contextmanager
def _frozen_running_stats(norms: list[nn.modules.batchnorm._BatchNorm]) -> Iterator[None]:
    """The recomputation normalises with the batch statistics again, but must not move the running
    statistics a second time (momentum 0 keeps them; the batch counter is put back)."""
    saved = [(m.momentum, None if m.num_batches_tracked is None else m.num_batches_tracked.clone()) for m in norms]
    for m in norms:
        m.momentum = 0.0
    try:
        yield
    finally:
        for m, (momentum, count) in zip(norms, saved):
            m.momentum = momentum
            if count is not None and m.num_batches_tracked is not None:
                m.num_batches_tracked.copy_(count)
