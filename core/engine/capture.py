"""Graph capture: a private, traced copy of the model that the passes may rewrite freely."""
from __future__ import annotations

import copy
from collections import Counter

import torch
from torch import fx, nn

from ..model.padding import crop_like, pad_to_multiple
from .frontends.ir import check_size, dim_size
from .graph_lock import GRAPH_LOCK, symbolic_trace


class CaptureError(RuntimeError):
    """torch.fx could not trace the model; the plan then runs it eagerly as one step."""


def capture(model: nn.Module) -> fx.GraphModule:
    """Trace a deep copy of `model` (eval mode) with torch.fx; the caller's model is never modified."""
    private = copy.deepcopy(model).eval()
    for parameter in private.parameters():
        parameter.requires_grad_(False)
    try:
        # Front ends' graphs read sizes through dim_size: keep it a node wherever a forward calls it.
        graph_module = symbolic_trace(private, autowrap_functions=(dim_size, check_size, pad_to_multiple, crop_like))
    except Exception as fx_error:  # fx raises many kinds (TraceError, TypeError on control flow, ...)
        try:
            return capture_by_export(private)
        except Exception as err:
            raise CaptureError(f"torch.fx cannot trace {type(model).__name__} ({str(fx_error).splitlines()[0]}), "
                               f"nor torch.export capture it ({str(err).splitlines()[0][:300]})") from err
    return graph_module


def capture_by_export(model: nn.Module) -> fx.GraphModule:
    """`model` through torch.export with a dynamic height and width, lifted into the engine IR.

    torch.export follows Python control flow on shapes (which torch.fx cannot); where the program it
    records holds only for some sizes, the lifted graph checks the input's size first.
    """
    from .frontends.export_lift import lift_exported_program

    conv = next((m for m in model.modules() if isinstance(m, nn.Conv2d)), None)
    channels = conv.in_channels if conv is not None else 3
    example = torch.zeros(1, channels, 256, 320)
    dims = {2: torch.export.Dim.AUTO, 3: torch.export.Dim.AUTO}
    with GRAPH_LOCK, torch.no_grad():
        program = torch.export.export(model, (example,), dynamic_shapes=(dims,))
    return lift_exported_program(program, source=None)  # its size range comes from a branch only


def replace_submodule(graph_module: fx.GraphModule, target: str, module: nn.Module) -> None:
    """Install `module` at the dotted path `target` (creating nothing but the leaf)."""
    parent_name, _, leaf = target.rpartition(".")
    parent = graph_module.get_submodule(parent_name) if parent_name else graph_module
    setattr(parent, leaf, module)


def module_of(graph_module: fx.GraphModule, node: fx.Node) -> nn.Module | None:
    """The submodule a call_module node calls, else None."""
    if node.op != "call_module":
        return None
    assert isinstance(node.target, str)
    return graph_module.get_submodule(node.target)


def call_counts(graph_module: fx.GraphModule) -> Counter[object]:
    """How many call_module nodes call each submodule target (shared weights show as > 1)."""
    return Counter(node.target for node in graph_module.graph.nodes if node.op == "call_module")


def single_user(node: fx.Node) -> fx.Node | None:
    """The only node reading `node`, or None when it has zero or several readers."""
    users = list(node.users)
    return users[0] if len(users) == 1 else None


def is_float_tensor(value: object) -> bool:
    return isinstance(value, torch.Tensor) and value.is_floating_point()
