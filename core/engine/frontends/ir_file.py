"""The engine IR as data: a graph in JSON plus its tensors, so a model is stored without code or pickle.

Only the IR's vocabulary round-trips: modules of `IR_MODULES` (rebuilt from their constructor
arguments), functions of `IR_FUNCTIONS` (by name) and aten ops (by their `aten` name, resolved in
the aten namespace only). Anything else is refused when saving, so whatever loads is known code.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import fx, nn

from .channel_norm import ChannelLayerNorm
from .ir import IR_FUNCTIONS_BY_NAME, FrontendError

IR_FILE_VERSION = 1

_FUNCTIONS = IR_FUNCTIONS_BY_NAME
_FUNCTION_NAMES = {id(f): name for name, f in _FUNCTIONS.items()}

# Constructor arguments of each module kind, read back from the module's attributes.
_MODULE_ARGS: dict[type[nn.Module], tuple[str, ...]] = {
    nn.Conv2d: ("in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation", "groups",
                "padding_mode"),
    nn.ConvTranspose2d: ("in_channels", "out_channels", "kernel_size", "stride", "padding", "output_padding",
                         "groups", "dilation"),
    nn.BatchNorm2d: ("num_features", "eps", "affine"),
    nn.GroupNorm: ("num_groups", "num_channels", "eps", "affine"),
    ChannelLayerNorm: ("num_channels", "eps", "affine"),
    nn.Linear: ("in_features", "out_features"),
    nn.ReLU: (), nn.ReLU6: (), nn.Hardswish: (), nn.Hardsigmoid: (), nn.SiLU: (), nn.Sigmoid: (), nn.Tanh: (),
    nn.Identity: (),
    nn.Hardtanh: ("min_val", "max_val"),
    nn.GELU: ("approximate",),
    nn.LeakyReLU: ("negative_slope",),
    nn.Softmax: ("dim",),
    nn.MaxPool2d: ("kernel_size", "stride", "padding", "dilation", "ceil_mode"),
    nn.AvgPool2d: ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad"),
    nn.AdaptiveAvgPool2d: ("output_size",),
}
_MODULE_KINDS = {cls.__name__: cls for cls in _MODULE_ARGS}


def _encode(value: Any) -> Any:
    if isinstance(value, fx.Node):
        return {"node": value.name}
    if isinstance(value, tuple):
        return {"tuple": [_encode(v) for v in value]}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    raise FrontendError(f"cannot store argument {value!r} ({type(value).__name__}) in the IR file")


def _decode(value: Any, nodes: dict[str, fx.Node]) -> Any:
    if isinstance(value, dict):
        if "node" in value:
            return nodes[str(value["node"])]
        if "tuple" in value:
            return tuple(_decode(v, nodes) for v in value["tuple"])
        if "dtype" in value:
            dtype = getattr(torch, str(value["dtype"]), None)
            if not isinstance(dtype, torch.dtype):
                raise FrontendError(f"unknown dtype {value['dtype']!r}")
            return dtype
        raise FrontendError(f"unknown argument encoding {sorted(value)}")
    if isinstance(value, list):
        return [_decode(v, nodes) for v in value]
    return value


def _function_name(target: Any) -> str:
    name = _FUNCTION_NAMES.get(id(target))
    if name is not None:
        return name
    if isinstance(target, torch._ops.OpOverload) and target.namespace == "aten":
        return f"aten.{target._schema.name.split('::')[1]}.{target._overloadname}"
    raise FrontendError(f"function {target} is outside the IR vocabulary")


def _function(name: str) -> Any:
    if name in _FUNCTIONS:
        return _FUNCTIONS[name]
    parts = name.split(".")
    if len(parts) == 3 and parts[0] == "aten":
        packet = getattr(torch.ops.aten, parts[1], None)
        overload = getattr(packet, parts[2], None) if packet is not None else None
        if isinstance(overload, torch._ops.OpOverload):
            return overload
    raise FrontendError(f"unknown function {name!r} in the IR file")


def graph_to_data(graph_module: fx.GraphModule) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """(JSON-able graph, tensors by name) for an IR GraphModule; FrontendError outside the vocabulary."""
    modules: dict[str, Any] = {}
    nodes = []
    for node in graph_module.graph.nodes:
        entry: dict[str, Any] = {"name": node.name, "op": node.op, "args": _encode(tuple(node.args))["tuple"],
                                 "kwargs": {k: _encode(v) for k, v in node.kwargs.items()}}
        if node.op == "call_module":
            module = graph_module.get_submodule(str(node.target))
            kind = type(module)
            if kind not in _MODULE_ARGS:
                raise FrontendError(f"{node.name}: module {kind.__name__} is outside the IR vocabulary")
            config = {arg: _encode(getattr(module, arg)) for arg in _MODULE_ARGS[kind]}
            if kind in (nn.Conv2d, nn.ConvTranspose2d, nn.Linear):
                config["bias"] = module.bias is not None
            modules[str(node.target)] = {"kind": kind.__name__, "args": config}
            entry["target"] = str(node.target)
        elif node.op == "call_function":
            entry["target"] = _function_name(node.target)
        elif node.op in ("get_attr", "placeholder", "output"):
            entry["target"] = str(node.target)
        else:
            raise FrontendError(f"{node.name}: {node.op} nodes are outside the IR vocabulary")
        nodes.append(entry)
    tensors = {k: v.detach().contiguous() for k, v in graph_module.state_dict().items()}
    return {"ir_version": IR_FILE_VERSION, "modules": modules, "nodes": nodes}, tensors


def graph_from_data(data: dict[str, Any], tensors: dict[str, torch.Tensor]) -> fx.GraphModule:
    """The IR GraphModule `graph_to_data` stored; FrontendError on anything unknown or inconsistent."""
    if data.get("ir_version") != IR_FILE_VERSION:
        raise FrontendError(f"IR version {data.get('ir_version')!r}; this leanseg reads {IR_FILE_VERSION}")
    root = nn.Module()
    for target, spec in data["modules"].items():
        kind = _MODULE_KINDS.get(str(spec["kind"]))
        if kind is None:
            raise FrontendError(f"unknown module kind {spec['kind']!r}")
        module_args = {k: _decode(v, {}) for k, v in spec["args"].items()}
        try:
            with torch.device("meta"):  # shapes only: nothing is allocated before they match the file's tensors
                module = kind(**module_args)
        except (TypeError, ValueError, RuntimeError) as err:
            raise FrontendError(f"module {target}: invalid arguments {module_args}: {err}") from None
        _install(root, str(target), module)
    graph = fx.Graph()
    nodes: dict[str, fx.Node] = {}
    for entry in data["nodes"]:
        op, target = entry["op"], entry.get("target")
        args = tuple(_decode(a, nodes) for a in entry["args"])
        kwargs = {k: _decode(v, nodes) for k, v in entry["kwargs"].items()}
        if op == "placeholder":
            node = graph.placeholder(str(target))
        elif op == "get_attr":
            if str(target) not in tensors:
                raise FrontendError(f"{entry['name']}: no tensor {target!r} in the file")
            _install_buffer(root, str(target), tensors[str(target)])
            node = graph.get_attr(str(target))
        elif op == "call_module":
            node = graph.call_module(str(target), args, kwargs)
        elif op == "call_function":
            node = graph.call_function(_function(str(target)), args, kwargs)
        elif op == "output":
            node = graph.output(args[0])
        else:
            raise FrontendError(f"unknown node op {op!r}")
        nodes[str(entry["name"])] = node
    graph_module = fx.GraphModule(root, graph)
    expected = graph_module.state_dict()
    missing = sorted(set(expected) - set(tensors))
    if missing:
        raise FrontendError(f"the file lacks tensors {missing[:3]}")
    for name, tensor in expected.items():
        if tuple(tensor.shape) != tuple(tensors[name].shape):
            raise FrontendError(f"tensor {name}: shape {tuple(tensors[name].shape)}, the graph needs "
                                f"{tuple(tensor.shape)}")
    graph_module.load_state_dict({k: tensors[k] for k in expected}, strict=True, assign=True)
    return graph_module.eval()


def _install(root: nn.Module, target: str, module: nn.Module) -> None:
    parent = root
    *path, leaf = target.split(".")
    for part in path:
        if not hasattr(parent, part):
            parent.add_module(part, nn.Module())
        parent = getattr(parent, part)
    parent.add_module(leaf, module)


def _install_buffer(root: nn.Module, target: str, tensor: torch.Tensor) -> None:
    *path, leaf = target.split(".")
    parent = root
    for part in path:
        if not hasattr(parent, part):
            parent.add_module(part, nn.Module())
        parent = getattr(parent, part)
    if not hasattr(parent, leaf):
        parent.register_buffer(leaf, torch.empty(tensor.shape, dtype=tensor.dtype, device="meta"))
