"""The eager profile: plain PyTorch (no_grad, eval), one fx graph node at a time, every value freed
after its last reader, and each step's hidden temporaries (convolution reorder buffers) measured."""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from ..engine.capture import capture
from ..engine.liveness import values_dying_after
from .eager_lifetimes import eager_dying_after
from .records import MemoryProfile
from .walker import StepRunner, run_plainly, walk_graph
from .workspace import measuring_runner


def eager_profile(model: nn.Module, x: Tensor, *, measure_hidden: bool = True, warmup: bool = True,
                  python_lifetimes: bool = True) -> MemoryProfile:
    """Per-step memory of `model` (unchanged: BatchNorm, NCHW) on x (1, C, H, W) under no_grad.

    The graph is the model's fx trace; the model itself is not modified. Values are freed when eager
    frees them (`eager_lifetimes`), or at their last reader with `python_lifetimes=False`. With `measure_hidden`
    each step's hidden temporaries are measured (see `workspace`); on meta tensors they are 0.
    """
    graph_module = capture(model).to(x.device, x.dtype)
    dying = eager_dying_after(graph_module.graph) if python_lifetimes else values_dying_after(graph_module.graph)
    freed = "when the Python frames holding them return" if python_lifetimes else "at their last use"
    notes = [f"eager PyTorch, eval, no_grad; fx graph of the unmodified model, values freed {freed}"]
    runner: StepRunner = run_plainly
    close: Callable[[], None] = lambda: None  # noqa: E731
    if measure_hidden and x.device.type != "meta":
        runner, close, note = measuring_runner(x.device)
        notes.append(note)
    try:
        with torch.no_grad():
            if warmup and x.device.type != "meta":
                walk_graph(graph_module, x)  # kernels chosen, caches made: not this run's memory
            steps = walk_graph(graph_module, x, runner=runner, dying=dying)
    finally:
        close()
    profile = MemoryProfile("eager", tuple(x.shape), str(x.dtype).replace("torch.", ""), steps, notes)
    peak = profile.peak_step
    if peak is not None:
        profile.notes.append(f"peak {peak.peak_bytes} B at {peak.layer} ({peak.workspace_bytes} B hidden temporaries)")
    return profile
