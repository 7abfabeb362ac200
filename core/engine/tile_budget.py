"""How much memory a tile may use and needs: the default budget (a share of what is free now) and, for a model
the engine does not run, a peak estimate from replaying its traced graph on meta tensors."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psutil
import torch
from torch import fx, nn

from .graph_lock import symbolic_trace
from .shapes import meta_copy

BUDGET_FRACTION_CPU = 0.5  # default budget: this share of the memory available now
BUDGET_FRACTION_CUDA = 0.8  # ... or of the free CUDA memory
# Under the default budget, no tile's estimated peak goes above this: larger tiles run no faster per pixel
# (a 2048-px strip already beats a whole 1024 image), but each takes minutes with no progress line and no
# chance to stop, and half of RAM is a budget no one chose. An explicit --memory-budget is used as given.
DEFAULT_MAX_TILE_BYTES = 1_000_000_000


def default_budget(device: torch.device) -> int:
    """A share of the memory free now: CUDA free memory, or the host's available memory."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free * BUDGET_FRACTION_CUDA)
    return int(psutil.virtual_memory().available * BUDGET_FRACTION_CPU)


def eager_peak_estimator(model: nn.Module, in_channels: int, probe_px: int = 128) -> Callable[[tuple[int, ...]], int]:
    """A stand-in for Plan.estimate_peak when only the eager model runs: input shape -> bytes.

    Replays the traced graph on meta tensors at probe_px x probe_px, freeing each value after its
    last reader and counting a convolution's hidden output-sized reorder buffer, then scales
    linearly with the pixel count (activations of a fully convolutional net do).
    """
    graph_module = symbolic_trace(model)
    per_pixel = _replay_peak(graph_module, (1, in_channels, probe_px, probe_px)) / probe_px**2

    def estimate(input_shape: tuple[int, ...]) -> int:
        return int(per_pixel * input_shape[-2] * input_shape[-1])

    return estimate


def _replay_peak(graph_module: fx.GraphModule, input_shape: tuple[int, ...]) -> int:
    meta = meta_copy(graph_module)
    nodes = list(meta.graph.nodes)
    last_use = {value: node for node in nodes for value in node.all_input_nodes}
    env: dict[fx.Node, Any] = {}
    live = peak = 0
    with torch.inference_mode():
        for node in nodes:
            if node.op == "placeholder":
                env[node] = torch.empty(input_shape, device="meta")
                continue
            if node.op == "output":
                break
            args = fx.node.map_arg(node.args, env.__getitem__)
            kwargs = fx.node.map_arg(node.kwargs, env.__getitem__)
            if node.op == "call_module":
                value = meta.get_submodule(str(node.target))(*args, **kwargs)
            elif node.op == "call_method":
                value = getattr(args[0], str(node.target))(*args[1:], **kwargs)
            elif node.op == "call_function":
                value = node.target(*args, **kwargs)  # type: ignore[operator]
            else:
                value = getattr(meta, str(node.target))
            env[node] = value
            size = _nbytes(value) if all(value is not a for a in args) else 0  # a pass-through is no new tensor
            reorder = size if node.op == "call_module" and isinstance(meta.get_submodule(str(node.target)),
                                                                      nn.Conv2d) else 0
            live += size
            peak = max(peak, live + reorder)
            for value_node in [v for v in node.all_input_nodes if last_use.get(v) is node]:
                dead = env.pop(value_node)
                if all(dead is not v for v in env.values()):
                    live -= _nbytes(dead)
    return peak


def _nbytes(value: object) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, (list, tuple)):
        return sum(_nbytes(v) for v in value)
    return 0
