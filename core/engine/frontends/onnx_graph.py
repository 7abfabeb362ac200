"""The ONNX importer's working state: the fx graph being built and what each ONNX value stands for.

An ONNX value becomes one of: a constant known at import time (`np.ndarray`), a tensor computed at run
time (an `fx.Node`), a small vector of sizes (`Dims`: Python ints known now or int-valued nodes from
`dim_size`), or a marker for a multi-node pattern still being matched (`Stacked`, `Grouped`, ...).
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Union

import numpy as np
import onnx
import torch
from onnx import numpy_helper
from torch import fx, nn

from .ir import FrontendError, dim_size

Item = Union[int, float, fx.Node]


@dataclass
class Dims:
    """A 0-D, 1-D or 2-D integer/float array computed from tensor shapes, evaluated in the graph.

    `columns` set: the items are a row-major (len(items) // columns, columns) matrix (how torch.onnx
    reorders F.pad's pads into ONNX's order: Reshape(-1, 2) -> Slice(step -1) -> Transpose -> Reshape(-1)).
    """

    items: list[Item]
    scalar: bool = False
    is_float: bool = False
    columns: int | None = None


@dataclass
class Stacked:
    """Same-shaped tensors stacked on a new axis 0 (Unsqueeze(0) + Concat(0)); only a sum over 0 may read it."""

    nodes: list[fx.Node]


@dataclass
class Grouped:
    """A 4-D tensor reshaped to (N, groups, -1): the first half of GroupNorm as torch exports it."""

    node: fx.Node
    groups: int


@dataclass
class GroupNormed:
    """InstanceNormalization over a Grouped tensor: GroupNorm waiting for the reshape back to 4-D."""

    node: fx.Node
    groups: int
    eps: float


@dataclass
class GeluPart:
    """A piece of x * 0.5 * (1 + erf(x / sqrt 2)); `stage` says how much of it has been seen."""

    x: fx.Node
    stage: str  # "erf", "1+erf", "x*(1+erf)"


@dataclass
class Empty:
    """A tensor with a zero-size axis (ConstantOfShape of (1, 0, h, w): timm encoders' feature for a stride they
    lack); a concatenation drops it, and Shape reads the size it was built with."""

    shape: Dims


Value = Union[np.ndarray, Dims, Stacked, Grouped, GroupNormed, GeluPart, Empty, fx.Node]


def attributes(node: onnx.NodeProto) -> dict[str, Any]:
    """The node's attributes as Python values (strings decoded, tensors as numpy arrays)."""
    result: dict[str, Any] = {}
    for attribute in node.attribute:
        value = onnx.helper.get_attribute_value(attribute)
        if isinstance(value, bytes):
            value = value.decode()
        elif isinstance(value, onnx.TensorProto):
            value = numpy_helper.to_array(value)
        result[attribute.name] = value
    return result


class Builder:
    """The fx graph under construction, its root module, and the ONNX value -> IR value table."""

    def __init__(self, model_name: str, opset: int, static_shapes: dict[str, list[int | None]],
                 consumers: Counter[str]) -> None:
        self.model_name = model_name
        self.opset = opset
        self.static_shapes = static_shapes
        self.consumers = consumers
        self.graph = fx.Graph()
        self.root = nn.Module()
        self.values: dict[str, Value] = {}
        self._names: set[str] = set()
        self.node: onnx.NodeProto = onnx.NodeProto()  # the node being imported, for messages

    # -- messages ------------------------------------------------------------------------------------

    def error(self, reason: str) -> FrontendError:
        """A FrontendError naming the model and the node being imported."""
        return FrontendError(f"{self.model_name}: node {self.node.name or '?'} (op {self.node.op_type}) {reason}")

    # -- reading inputs ------------------------------------------------------------------------------

    def value(self, index: int) -> Value | None:
        """The current node's input `index`, or None when it is absent or empty (an omitted optional)."""
        if index >= len(self.node.input) or not self.node.input[index]:
            return None
        name = self.node.input[index]
        if name not in self.values:
            raise self.error(f"reads {name!r}, which no earlier node produced")
        return self.values[name]

    def tensor(self, index: int) -> fx.Node:
        value = self.settled(self.value(index))
        if not isinstance(value, fx.Node):
            raise self.error(f"needs a run-time tensor as input {index}, got {type(value).__name__}")
        return value

    def settled(self, value: Value | None) -> Value | None:
        """`value`, with a Grouped tensor read by something other than GroupNorm (the next node, or the graph's
        output) made the plain reshape to (N, groups, -1) it is."""
        if isinstance(value, Grouped):
            batch = self.call(dim_size, value.node, 0, rank=None)
            return self.call(torch.reshape, value.node, [batch, value.groups, -1], rank=3)
        return value

    def const(self, index: int, default: np.ndarray | None = None) -> np.ndarray:
        value = self.value(index)
        if value is None and default is not None:
            return default
        if not isinstance(value, np.ndarray):
            raise self.error(f"needs input {index} to be a constant known at import time")
        return value

    def rank(self, node: fx.Node) -> int:
        rank = node.meta.get("rank")
        if rank is None:
            raise self.error(f"reads {node.name}, whose rank is unknown")
        return int(rank)

    def static_dim(self, node: fx.Node, axis: int) -> int | None:
        """node's size along `axis` when the ONNX shapes fix it for every input size, else None."""
        dims = self.static_shapes.get(str(node.meta.get("onnx_name", "")))
        if dims is None or axis >= len(dims):
            return None
        return dims[axis]

    # -- emitting ------------------------------------------------------------------------------------

    def unique(self, wanted: str) -> str:
        base = re.sub(r"\W", "_", wanted.strip("/")) or "node"
        if base[0].isdigit():
            base = "n" + base
        name, counter = base, 1
        while name in self._names or hasattr(self.root, name):
            counter += 1
            name = f"{base}_{counter}"
        self._names.add(name)
        return name

    def call_module(self, module: nn.Module, *args: Any, rank: int = 4) -> fx.Node:
        """A call_module node on a fresh module named after the ONNX node."""
        target = self.unique(self.node.name or self.node.op_type)
        self.root.add_module(target, module.eval())
        return self.mark(self.graph.call_module(target, args), rank)

    def call(self, function: Any, *args: Any, rank: int | None = 4, **kwargs: Any) -> fx.Node:
        return self.mark(self.graph.call_function(function, args, kwargs), rank)

    def mark(self, node: fx.Node, rank: int | None) -> fx.Node:
        node.meta["rank"] = rank
        node.meta["onnx_name"] = self.node.output[0] if self.node.output else ""
        return node

    def operand(self, value: Value | None) -> fx.Node | float | int:
        """A tensor operand for arithmetic: a node as is, a one-element constant as a Python number,
        any other constant as a buffer read with get_attr."""
        if isinstance(value, fx.Node):
            return value
        if isinstance(value, np.ndarray):
            if value.size == 1:
                number = value.reshape(()).item()
                return float(number) if value.dtype.kind == "f" else int(number)
            return self.buffer(value)
        raise self.error(f"cannot use a {type(value).__name__} as a tensor operand")

    def buffer(self, array: np.ndarray) -> fx.Node:
        name = self.unique(f"const_{self.node.name or self.node.op_type}")
        self.root.register_buffer(name, torch.from_numpy(np.array(array, copy=True)))
        return self.mark(self.graph.get_attr(name), array.ndim)

    def module_of(self, node: Any) -> nn.Module | None:
        if isinstance(node, fx.Node) and node.op == "call_module":
            return self.root.get_submodule(str(node.target))
        return None

    def only_reader(self, index: int) -> bool:
        """Whether the current node is the only reader of its input `index` (so it may absorb it)."""
        return self.consumers[self.node.input[index]] == 1
