"""One lock per process around tracing a model and running one.

torch.fx's tracer replaces `nn.Module.__call__` for every thread while it traces (torch.export's
non-strict capture patches module calls too), so a model run on another thread meanwhile is routed
into the tracer and fails ("module is not installed as a submodule"). The app runs models on several
threads (the main window's worker, the batch dialog, the video panel), so a trace and every model
run hold GRAPH_LOCK. It is re-entrant: a run may trace (a tile estimator traced on first use).
"""
from __future__ import annotations

import threading

from torch import fx, nn

GRAPH_LOCK = threading.RLock()


def symbolic_trace(model: nn.Module) -> fx.GraphModule:
    """`torch.fx.symbolic_trace(model)`, holding GRAPH_LOCK while it patches module calls."""
    with GRAPH_LOCK:
        return fx.symbolic_trace(model)
