"""The engine's profile (its own exact per-step accounting, explained tensor by tensor) and the
liveness lower bounds, blocks whole and in pieces."""
from __future__ import annotations

import copy

import torch
from torch import Tensor, fx, nn

from ..engine import Plan
from ..engine import compile as compile_plan
from ..engine.layout import CHANNELS_LAST
from .records import LowerBounds, MemoryProfile, ProfileStep
from .walker import walk_graph
from .workspace import step_high_water


def _meta_steps(graph_module: fx.GraphModule, input_shape: tuple[int, ...], dtype: torch.dtype) -> list[ProfileStep]:
    """The plan's graph walked on meta tensors as the executor runs it: shapes, liveness, in-place adds."""
    meta_module = copy.deepcopy(graph_module).to("meta")
    x = torch.empty(input_shape, device="meta")
    return walk_graph(meta_module, x, in_place_adds=True,
                      prepare_input=lambda t: t.to(dtype).contiguous(memory_format=CHANNELS_LAST))


def engine_profile(plan: Plan, x: Tensor) -> MemoryProfile:
    """Per-step memory of `plan.run(x)` (labels out): the engine's own accounting, with the tensors alive.

    Live bytes are the executor's exact figures (`plan.last_stats`); the alive tensors come from the
    same graph walked on meta tensors; `workspace_bytes` is what a step held on top of its inputs and
    output: band temporaries (accounted by the engine) plus what memory rose beyond the engine's
    accounting while the step ran (measured per step, as for eager: kernel scratch, allocator).
    """
    if plan.graph_module is None:
        raise ValueError("this plan runs the model eagerly as one step (fx could not trace it); "
                         "there is no per-step engine profile; use the eager profile")
    plan.run(x, output="labels")  # warm-up
    rises = _run_measured(plan, x)
    stats = plan.last_stats
    assert stats is not None
    explained = _meta_steps(plan.graph_module, tuple(x.shape), plan.dtype)
    if len(explained) != len(stats.steps):
        raise RuntimeError(f"engine ran {len(stats.steps)} steps but its graph has {len(explained)}")
    steps = []
    mismatched, unaccounted = 0, []
    for index, (record, shadow) in enumerate(zip(stats.steps, explained)):
        mismatched += record.live_bytes != shadow.live_bytes
        hidden = max(0, rises[index] - record.peak_bytes) if rises else 0
        unaccounted.append(hidden)
        steps.append(ProfileStep(shadow.index, shadow.node, shadow.layer, record.live_bytes, record.peak_bytes + hidden,
                                 max(0, record.peak_bytes - shadow.peak_bytes) + hidden, shadow.alive, shadow.running))
    notes = ["engine plan: " + "; ".join(plan.notes)]
    notes += [f"ran eagerly: {name}" for name in plan.fallbacks]
    if mismatched:
        notes.append(f"{mismatched} steps' live bytes differ from the tensors listed (storage shared in ways "
                     "the meta walk does not see)")
    profile = MemoryProfile("engine", tuple(x.shape), str(plan.dtype).replace("torch.", ""), steps, notes)
    profile.notes.append(f"the engine's own accounting: peak {stats.peak_bytes} B at {stats.peak_step}")
    peak = profile.peak_step
    if peak is not None:
        hidden = unaccounted[peak.index]
        profile.notes.append(f"peak {peak.peak_bytes} B at {peak.layer}: {peak.peak_bytes - peak.workspace_bytes} B "
                             f"of inputs and outputs + {peak.workspace_bytes - hidden} B band temporaries + "
                             f"{hidden} B measured beyond the engine's accounting (kernel scratch, allocator)")
    return profile


def _run_measured(plan: Plan, x: Tensor) -> list[int]:
    """Run the plan (labels out); per step, the highest memory while it ran above the level before the run
    ([] where nothing can be measured)."""
    gauge = step_high_water(x.device)
    if gauge is None:
        plan.run(x, output="labels")
        return []
    rises: list[int] = []

    def on_step(name: str, live_bytes: int) -> None:
        rises.append(gauge.rise())
        gauge.mark()

    try:
        gauge.mark()
        plan.run(x, output="labels", on_step=on_step)
    finally:
        gauge.close()
    return rises


def lower_bounds(model: nn.Module, input_shape: tuple[int, ...]) -> LowerBounds:
    """fp32 liveness bounds for (1, C, H, W): BatchNorm folded, activations fused, adds in place,
    every value freed at its last use; blocks whole, then inverted residuals and head in pieces
    of vanishing size (their band temporaries left out)."""
    whole = _bound(compile_plan(model, device="cpu", bands=False, head=False), input_shape)
    pieces = _bound(compile_plan(model, device="cpu", bands=True, head=True), input_shape)
    return LowerBounds(whole[0], pieces[0], whole[1], pieces[1])


def _bound(plan: Plan, input_shape: tuple[int, ...]) -> tuple[int, str]:
    if plan.graph_module is None:
        return 0, "(no graph)"
    steps = _meta_steps(plan.graph_module, input_shape, torch.float32)
    top = max(steps, key=lambda s: s.peak_bytes)
    return top.peak_bytes, top.layer
