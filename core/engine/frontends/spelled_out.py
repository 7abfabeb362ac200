"""Activations a model spells out: `x * sigmoid(x)` (timm's Swish, EfficientNet ports) is SiLU, and
`x * hardsigmoid(x)` is Hardswish. Spelled out, the sigmoid is a second full-size map beside x until the
product; as one activation module the engine fuses it into the conv before it (a oneDNN post-op)."""
from __future__ import annotations

import operator

import torch
import torch.nn.functional as F
from torch import fx, nn

_PRODUCTS = (operator.mul, torch.mul)
_GATES: dict[type[nn.Module], type[nn.Module]] = {nn.Sigmoid: nn.SiLU, nn.Hardsigmoid: nn.Hardswish}
_GATE_FUNCTIONS: dict[object, type[nn.Module]] = {torch.sigmoid: nn.SiLU, F.sigmoid: nn.SiLU,
                                                  F.hardsigmoid: nn.Hardswish}


def _activation_of_gate(graph_module: fx.GraphModule, gate: fx.Node) -> type[nn.Module] | None:
    if gate.op == "call_module":
        return _GATES.get(type(graph_module.get_submodule(str(gate.target))))
    if gate.op == "call_function" and len(gate.args) == 1 and not gate.kwargs:
        return _GATE_FUNCTIONS.get(gate.target)
    return None


def lift_spelled_out_activations(graph_module: fx.GraphModule) -> int:
    """Replace every `x * gate(x)` whose gate is read by that product alone by one activation module;
    returns how many (the graph is recompiled)."""
    lifted = 0
    for node in list(graph_module.graph.nodes):
        if node.op != "call_function" or node.target not in _PRODUCTS or len(node.args) != 2 or node.kwargs:
            continue
        for x, gate in (node.args, node.args[::-1]):
            if not (isinstance(x, fx.Node) and isinstance(gate, fx.Node) and gate.args[:1] == (x,)
                    and len(gate.users) == 1):
                continue
            activation = _activation_of_gate(graph_module, gate)
            if activation is None:
                continue
            name = f"spelled_out_{activation.__name__.lower()}_{lifted}"
            while hasattr(graph_module, name):
                name += "_"
            graph_module.add_module(name, activation())
            with graph_module.graph.inserting_after(node):
                replacement = graph_module.graph.call_module(name, (x,))
            node.replace_all_uses_with(replacement)
            lifted += 1
            break
    if lifted:
        graph_module.graph.eliminate_dead_code()
        graph_module.delete_all_unused_submodules()
        graph_module.recompile()
    return lifted
