"""When eager PyTorch frees a value: not at its last reader, but when the Python frames holding it return.

Two rules cover the U-Nets here (and most conv nets written as nested modules):
- a module's inputs stay alive until the module returns (nn.Module.__call__ holds its `args`);
- a function's result computed in a module's forward (`x = F.interpolate(x)`, `torch.cat(...)`)
  is a local of that forward, alive until the forward returns.
Sequential rebinds its `input`, so a leaf module's output inside it dies at its last reader.
The module scopes come from the nodes' `nn_module_stack`, recorded by torch.fx while tracing.
"""
from __future__ import annotations

from torch import fx


def _scopes(node: fx.Node) -> tuple[str, ...]:
    """The module paths whose forward is running when the node runs (outermost first)."""
    stack = node.meta.get("nn_module_stack") or {}
    scopes = tuple(stack.keys())
    if node.op == "call_module" and (not scopes or scopes[-1] != node.target):
        scopes += (str(node.target),)
    return scopes


def eager_dying_after(graph: fx.Graph) -> dict[fx.Node, list[fx.Node]]:
    """node -> values eager PyTorch frees right after it runs (values the output reads never die)."""
    nodes = [n for n in graph.nodes]
    position = {node: i for i, node in enumerate(nodes)}
    scopes = {node: _scopes(node) for node in nodes}
    scope_end: dict[str, int] = {}
    for node in nodes:
        for scope in scopes[node]:
            scope_end[scope] = position[node]
    output_reads = {v for n in nodes if n.op == "output" for v in n.all_input_nodes}
    dying: dict[fx.Node, list[fx.Node]] = {node: [] for node in nodes}
    for value in nodes:
        if value.op == "output" or value in output_reads:
            continue
        end = position[value]
        own = set(scopes[value])
        for reader in value.users:
            if reader.op == "output":
                continue
            end = max(end, position[reader])
            for scope in scopes[reader]:
                if scope not in own:  # the value is an argument of this module call
                    end = max(end, scope_end[scope])
        if value.op in ("call_function", "call_method") and scopes[value]:
            end = max(end, scope_end[scopes[value][-1]])  # a local of the enclosing forward
        dying[nodes[end]].append(value)
    return dying
