"""ONNX ops on constants and on size vectors: folded now when known, kept in the graph when not.

torch.onnx computes Resize and Pad sizes with Shape -> Gather -> Unsqueeze -> Concat -> Cast chains.
Whatever is known at import time is folded with numpy; sizes that follow the input's height and width
become `dim_size` nodes and Python int arithmetic (`operator.*`), so one graph serves every size.
"""
from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx

from .ir import dim_size
from .onnx_graph import Builder, Dims, Empty, Item, Value

Folder = Callable[[Builder, list[Any], dict[str, Any]], Any]
INT64_MAX = np.iinfo(np.int64).max


def _onnx_int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu" and np.asarray(b).dtype.kind in "iu":
        return np.trunc(a / b).astype(a.dtype)  # ONNX integer Div truncates toward zero
    return np.asarray(a / b, dtype=a.dtype)


def axes_of(b: Builder, attrs: dict[str, Any], index: int) -> list[int]:
    """axes as an attribute (older opsets) or as input `index` (opset 13+/18+)."""
    if "axes" in attrs:
        return [int(a) for a in attrs["axes"]]
    value = b.value(index)
    return [] if value is None else [int(a) for a in b.const(index).reshape(-1)]


def slice_spec(b: Builder, rank: int) -> list[slice]:
    starts, ends = b.const(1).reshape(-1), b.const(2).reshape(-1)
    axes = b.const(3, np.arange(len(starts))).reshape(-1)
    steps = b.const(4, np.ones(len(starts), dtype=np.int64)).reshape(-1)
    spec = [slice(None)] * rank
    for start, end, axis, step in zip(starts, ends, axes, steps):
        end = None if int(step) < 0 and end <= -INT64_MAX else min(int(end), INT64_MAX // 2)
        spec[int(axis) % rank] = slice(int(start), end, int(step))
    return spec


def _np_slice(b: Builder, ins: list[Any], attrs: dict[str, Any]) -> np.ndarray:
    if "starts" in attrs:  # opset < 10: starts/ends/axes as attributes
        spec = [slice(None)] * ins[0].ndim
        axes = attrs.get("axes", range(len(attrs["starts"])))
        for start, end, axis in zip(attrs["starts"], attrs["ends"], axes):
            spec[int(axis) % ins[0].ndim] = slice(int(start), min(int(end), INT64_MAX // 2))
        return ins[0][tuple(spec)]
    return ins[0][tuple(slice_spec(b, ins[0].ndim))]


def _np_reshape(b: Builder, ins: list[Any], attrs: dict[str, Any]) -> np.ndarray:
    shape = [int(s) for s in ins[1].reshape(-1)]
    if not attrs.get("allowzero", 0):
        shape = [ins[0].shape[i] if s == 0 else s for i, s in enumerate(shape)]
    return ins[0].reshape(shape)


def _np_cast(b: Builder, ins: list[Any], attrs: dict[str, Any]) -> np.ndarray:
    return ins[0].astype(onnx.helper.tensor_dtype_to_np_dtype(attrs["to"]))


def _np_constant_of_shape(b: Builder, ins: list[Any], attrs: dict[str, Any]) -> np.ndarray:
    fill = attrs.get("value", np.zeros(1, dtype=np.float32))
    return np.full([int(s) for s in ins[0].reshape(-1)], fill.reshape(-1)[0], dtype=fill.dtype)


FOLDERS: dict[str, Folder] = {
    "Identity": lambda b, ins, a: ins[0],
    "Add": lambda b, ins, a: np.asarray(ins[0] + ins[1], dtype=ins[0].dtype),
    "Sub": lambda b, ins, a: np.asarray(ins[0] - ins[1], dtype=ins[0].dtype),
    "Mul": lambda b, ins, a: np.asarray(ins[0] * ins[1], dtype=ins[0].dtype),
    "Div": lambda b, ins, a: _onnx_int_div(ins[0], ins[1]),
    "Pow": lambda b, ins, a: np.asarray(ins[0] ** ins[1], dtype=ins[0].dtype),
    "Sqrt": lambda b, ins, a: np.sqrt(ins[0]),
    "Neg": lambda b, ins, a: -ins[0],
    "Floor": lambda b, ins, a: np.floor(ins[0]),
    "Ceil": lambda b, ins, a: np.ceil(ins[0]),
    "Min": lambda b, ins, a: np.minimum.reduce([i for i in ins if i is not None]),
    "Max": lambda b, ins, a: np.maximum.reduce([i for i in ins if i is not None]),
    "Equal": lambda b, ins, a: np.equal(ins[0], ins[1]),
    "Where": lambda b, ins, a: np.where(ins[0], ins[1], ins[2]),
    "Cast": _np_cast,
    "Concat": lambda b, ins, a: np.concatenate([i for i in ins if i is not None], axis=a["axis"]),
    "Gather": lambda b, ins, a: np.take(ins[0], ins[1], axis=a.get("axis", 0)),
    "Unsqueeze": lambda b, ins, a: np.expand_dims(ins[0], tuple(axes_of(b, a, 1))),
    "Squeeze": lambda b, ins, a: np.squeeze(ins[0], tuple(axes_of(b, a, 1)) or None),
    "Slice": _np_slice,
    "Reshape": _np_reshape,
    "Transpose": lambda b, ins, a: np.transpose(ins[0], a.get("perm")),
    "Expand": lambda b, ins, a: ins[0] * np.ones([int(s) for s in ins[1]], dtype=ins[0].dtype),
    "ConstantOfShape": _np_constant_of_shape,
    "Range": lambda b, ins, a: np.arange(ins[0], ins[1], ins[2], dtype=ins[0].dtype),
    "Shape": lambda b, ins, a: np.array(ins[0].shape[a.get("start", 0):a.get("end")], dtype=np.int64),
}


# -- size vectors computed in the graph -----------------------------------------------------------


def as_dims(value: Value | None) -> Dims | None:
    """A constant (0-D or 1-D) or a Dims as Dims; None for anything else."""
    if isinstance(value, Dims):
        return value
    if isinstance(value, np.ndarray) and value.ndim <= 1 and value.dtype.kind in "iuf":
        return Dims([v.item() for v in value.reshape(-1)], scalar=value.ndim == 0, is_float=value.dtype.kind == "f")
    return None


def settle(dims: Dims) -> Value:
    """Dims whose items are all known now become a plain constant."""
    if any(not isinstance(item, (int, float)) for item in dims.items):
        return dims
    array = np.array(dims.items, dtype=np.float32 if dims.is_float else np.int64)
    if dims.columns is not None:
        return array.reshape(-1, dims.columns)
    return array.reshape(()) if dims.scalar else array


def _grid(dims: Dims) -> np.ndarray:
    """The items as a numpy object array of the Dims' shape (nodes and ints alike)."""
    grid = np.empty(len(dims.items), dtype=object)
    grid[:] = dims.items
    return grid.reshape(-1, dims.columns) if dims.columns is not None else grid


def _from_grid(grid: np.ndarray, like: Dims) -> Value:
    if grid.ndim > 2:
        raise ValueError(f"a size array of rank {grid.ndim}")
    columns = int(grid.shape[1]) if grid.ndim == 2 else None
    return settle(Dims(list(grid.reshape(-1)), scalar=grid.ndim == 0, is_float=like.is_float, columns=columns))


def _shape(b: Builder, attrs: dict[str, Any]) -> Value:
    sizes = b.value(0)
    if isinstance(sizes, Dims):  # the shape of a size array is known now
        return np.array(_grid(sizes).shape[attrs.get("start", 0):attrs.get("end")], dtype=np.int64)
    if isinstance(sizes, Empty):  # an empty tensor's shape is the size it was built with
        return settle(Dims(sizes.shape.items[attrs.get("start", 0):attrs.get("end")]))
    node = b.tensor(0)
    rank = b.rank(node)
    items: list[Item] = []
    for axis in range(rank)[attrs.get("start", 0):attrs.get("end")]:
        static = b.static_dim(node, axis)
        items.append(static if static is not None else b.call(dim_size, node, axis, rank=None))
    return settle(Dims(items))


def _dims(b: Builder, index: int) -> Dims:
    dims = as_dims(b.value(index))
    if dims is None:
        raise b.error(f"needs input {index} to be a size vector")
    return dims


def _gather(b: Builder, attrs: dict[str, Any]) -> Value:
    dims, indices = _dims(b, 0), b.const(1)
    picked = [dims.items[int(i)] for i in indices.reshape(-1)]
    return settle(Dims(picked, scalar=indices.ndim == 0, is_float=dims.is_float))


def _slice(b: Builder, attrs: dict[str, Any]) -> Value:
    dims = _dims(b, 0)
    grid = _grid(dims)
    return _from_grid(grid[tuple(slice_spec(b, grid.ndim))], dims)


def _transpose(b: Builder, attrs: dict[str, Any]) -> Value:
    dims = _dims(b, 0)
    return _from_grid(np.transpose(_grid(dims), attrs.get("perm")), dims)


def _unsqueeze(b: Builder, attrs: dict[str, Any]) -> Value:
    dims = _dims(b, 0)
    if not dims.scalar or axes_of(b, attrs, 1) not in ([0], [-1]):
        raise b.error("on a size vector supports only a scalar unsqueezed on axis 0")
    return settle(Dims(dims.items, is_float=dims.is_float))


def _squeeze(b: Builder, attrs: dict[str, Any]) -> Value:
    dims = _dims(b, 0)
    if len(dims.items) != 1:
        raise b.error("on a size vector supports only a one-element vector")
    return settle(Dims(dims.items, scalar=True, is_float=dims.is_float))


def _concat(b: Builder, attrs: dict[str, Any]) -> Value:
    parts = [_dims(b, i) for i in range(len(b.node.input)) if b.value(i) is not None]
    items = [item for part in parts for item in part.items]
    return settle(Dims(items, is_float=any(p.is_float for p in parts)))


def _reshape(b: Builder, attrs: dict[str, Any]) -> Value:
    dims, shape = _dims(b, 0), b.const(1).reshape(-1)
    grid = _grid(dims)
    if not attrs.get("allowzero", 0):
        shape = np.array([grid.shape[i] if s == 0 else s for i, s in enumerate(shape)])
    try:
        return _from_grid(grid.reshape([int(s) for s in shape]), dims)
    except ValueError:
        raise b.error(f"reshapes a size array of shape {grid.shape} to {shape.tolist()}; only up to 2-D") from None


def _cast(b: Builder, attrs: dict[str, Any]) -> Value:
    dims = _dims(b, 0)
    to_float = onnx.helper.tensor_dtype_to_np_dtype(attrs["to"]).kind == "f"
    if dims.is_float and not to_float:
        raise b.error("casts a run-time float size to an integer; unsupported")
    return settle(Dims(dims.items, scalar=dims.scalar, is_float=to_float, columns=dims.columns))


def _arithmetic(function: Callable[[Any, Any], Any]) -> Callable[[Builder, dict[str, Any]], Value]:
    def apply(b: Builder, attrs: dict[str, Any]) -> Value:
        left, right = _dims(b, 0), _dims(b, 1)
        is_float = left.is_float or right.is_float
        op = operator.truediv if function is operator.floordiv and is_float else function
        size = max(len(left.items), len(right.items))
        if {len(left.items), len(right.items)} - {1, size}:
            raise b.error(f"combines size vectors of lengths {len(left.items)} and {len(right.items)}")
        items: list[Item] = []
        for i in range(size):
            x, y = left.items[i % len(left.items)], right.items[i % len(right.items)]
            static = isinstance(x, (int, float)) and isinstance(y, (int, float))
            items.append(op(x, y) if static else b.call(op, x, y, rank=None))
        return settle(Dims(items, scalar=left.scalar and right.scalar, is_float=is_float))
    return apply


DIMS_OPS: dict[str, Callable[[Builder, dict[str, Any]], Value]] = {
    "Shape": _shape,
    "Gather": _gather,
    "Slice": _slice,
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Concat": _concat,
    "Cast": _cast,
    "Reshape": _reshape,
    "Transpose": _transpose,
    "Identity": lambda b, attrs: _dims(b, 0),
    "Add": _arithmetic(operator.add),
    "Sub": _arithmetic(operator.sub),
    "Mul": _arithmetic(operator.mul),
    "Div": _arithmetic(operator.floordiv),  # sizes are >= 0: ONNX's truncation is floor division
}
