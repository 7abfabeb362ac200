"""One lock per process around tracing a model and running one.

torch.fx's tracer replaces `nn.Module.__call__` for every thread while it traces (torch.export's
non-strict capture patches module calls too), so a model run on another thread meanwhile is routed
into the tracer and fails ("module is not installed as a submodule"). The app runs models on several
threads (the main window's worker, the batch dialog, the video panel), so a trace and every model
run hold GRAPH_LOCK. It is re-entrant: a run may trace (a receptive field is traced on first use).
"""
from __future__ import annotations

import threading
from typing import Any

from torch import fx, nn

from .frontends.channel_norm import ChannelLayerNorm

GRAPH_LOCK = threading.RLock()


class Tracer(fx.Tracer):
    """torch.fx's tracer that keeps the engine IR's own layers (ChannelLayerNorm) as modules, as it keeps
    torch.nn's, so a lifted graph traces to itself."""

    def is_leaf_module(self, m: nn.Module, module_qualified_name: str) -> bool:
        return isinstance(m, ChannelLayerNorm) or super().is_leaf_module(m, module_qualified_name)


def symbolic_trace(model: nn.Module, **tracer_options: Any) -> fx.GraphModule:
    """`torch.fx.symbolic_trace(model)` with the engine's Tracer, holding GRAPH_LOCK while it patches
    module calls."""
    with GRAPH_LOCK:
        tracer = Tracer(**tracer_options)
        graph = tracer.trace(model)
    name = model.__class__.__name__ if isinstance(model, nn.Module) else model.__name__
    return fx.GraphModule(tracer.root, graph, name)
