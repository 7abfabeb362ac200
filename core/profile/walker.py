"""Run an fx graph node by node, freeing each value after its last reader, and record per step
the live bytes and the tensors alive (with the node and layer that made them)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import Tensor, fx

from ..engine.accounting import LiveAccount, storage_key, tensors_in
from ..engine.liveness import in_place_operands, values_dying_after, write_in_place
from .records import AliveTensor, ProfileStep

# (run the node) -> (its value, how far memory rose above its level before the call; None: not measured)
StepRunner = Callable[[Callable[[], Any]], tuple[Any, "int | None"]]


def layer_of(graph_module: fx.GraphModule, node: fx.Node) -> str:
    """A readable layer name: the module's qualified name, or `<enclosing module>.<function node>`."""
    if node.op == "call_module":
        target = str(node.target)
        if target.endswith("_banded") and "." not in target:  # the engine's banded block, named after its depthwise
            return target[: -len("_banded")].replace("_", ".") + " [banded]"
        return target
    if node.op in ("placeholder", "output"):
        return node.name
    stack = node.meta.get("nn_module_stack") or {}
    scope = next(reversed(stack.keys()), "") if stack else ""
    return f"{scope}.{node.name}" if scope else node.name


def run_plainly(call: Callable[[], Any]) -> tuple[Any, int | None]:
    """A StepRunner that measures nothing: no hidden bytes (meta tensors, shapes only)."""
    return call(), None


def _snapshot(env: dict[fx.Node, Any], layers: dict[fx.Node, str], account: LiveAccount) -> tuple[AliveTensor, ...]:
    seen: set[int] = set()
    alive = []
    for node, value in env.items():
        tensors = list(tensors_in(value))
        for position, tensor in enumerate(tensors):
            if account.is_external(tensor):
                continue
            key = storage_key(tensor)
            nbytes = 0 if key in seen else int(tensor.untyped_storage().nbytes())
            seen.add(key)
            name = node.name if len(tensors) == 1 else f"{node.name}[{position}]"
            alive.append(AliveTensor(name, layers[node], tuple(tensor.shape), str(tensor.dtype).replace("torch.", ""),
                                     nbytes))
    return tuple(alive)


def walk_graph(graph_module: fx.GraphModule, x: Tensor, *, runner: StepRunner = run_plainly,
               in_place_adds: bool = False, prepare_input: Callable[[Tensor], Tensor] | None = None,
               on_step: Callable[[ProfileStep], None] | None = None,
               dying: dict[fx.Node, list[fx.Node]] | None = None) -> list[ProfileStep]:
    """Steps of one run of `graph_module` on x (1, C, H, W); the caller's x is never counted.

    `in_place_adds` mirrors the engine (a residual sum overwrites the operand that dies there);
    `prepare_input` turns x into the placeholder's value as the executor would (its bytes count).
    `dying` (node -> values freed after it) defaults to freeing each value after its last reader.
    """
    dying = dying if dying is not None else values_dying_after(graph_module.graph)
    layers = {node: layer_of(graph_module, node) for node in graph_module.graph.nodes}
    account = LiveAccount()
    account.mark_external(x)
    env: dict[fx.Node, Any] = {}
    steps: list[ProfileStep] = []
    for node in graph_module.graph.nodes:
        if node.op == "output":
            break
        if node.op == "placeholder":
            value, rise = (prepare_input(x) if prepare_input else x), None
        else:
            args = fx.node.map_arg(node.args, env.__getitem__)
            kwargs = fx.node.map_arg(node.kwargs, env.__getitem__)
            operands = in_place_operands(node, dying[node]) if in_place_adds else ()
            value, rise = runner(_caller(graph_module, node, args, kwargs, operands, account))
            del args, kwargs
        env[node] = value
        before = account.live_bytes
        account.hold(value)
        workspace = 0 if rise is None else max(0, rise - (account.live_bytes - before))
        running = _snapshot(env, layers, account)
        peak = account.live_bytes + workspace
        for dead in dying[node]:
            account.release(env.pop(dead))
        del value
        step = ProfileStep(len(steps), node.name, layers[node], account.live_bytes, peak, workspace,
                           _snapshot(env, layers, account), running)
        steps.append(step)
        if on_step is not None:
            on_step(step)
    env.clear()
    return steps


def _caller(graph_module: fx.GraphModule, node: fx.Node, args: Any, kwargs: Any, in_place: tuple[int, ...],
            account: LiveAccount) -> Callable[[], Any]:
    if in_place:
        def run_in_place() -> Any:
            written = write_in_place(node, args, in_place, account.may_overwrite)
            return written if written is not None else node.target(*args, **kwargs)  # type: ignore[operator]

        return run_in_place
    if node.op == "call_module":
        module = graph_module.get_submodule(str(node.target))
        return lambda: module(*args, **kwargs)
    if node.op == "call_function":
        function: Callable[..., Any] = node.target  # type: ignore[assignment]
        return lambda: function(*args, **kwargs)
    if node.op == "call_method":
        return lambda: getattr(args[0], str(node.target))(*args[1:], **kwargs)
    if node.op == "get_attr":
        value: Any = graph_module
        for part in str(node.target).split("."):
            value = getattr(value, part)
        return lambda: value
    raise ValueError(f"cannot run fx node {node.name} with op {node.op!r}")
