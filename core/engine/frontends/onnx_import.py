"""Front end: an ONNX graph (`.onnx`) read as protobuf and rebuilt in the engine IR.

Nothing in the file runs: the `onnx` package parses it, and each node is translated into standard
torch.nn modules (Conv2d, BatchNorm2d, activations, pools) and plain functions (operator.*, torch.cat,
F.interpolate, F.pad). Size arithmetic that follows the input's height and width stays in the graph
as `dim_size` nodes, so a model exported with dynamic height/width runs at every size.

    graph_module = import_onnx("model.onnx")     # forward: (1, C, H, W) float32 -> logits
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper
from torch import fx

from .ir import FrontendError
from .onnx_graph import Builder, Dims, Value, attributes
from .onnx_layers import LAYERS
from .onnx_ops import OPS
from .onnx_shapes import DIMS_OPS, FOLDERS
from .spelled_out import lift_spelled_out_activations

HANDLERS = {**LAYERS, **OPS}
PASS_THROUGH = ("Identity", "Dropout")
SUPPORTED = sorted({*HANDLERS, *DIMS_OPS, *FOLDERS, *PASS_THROUGH, "Constant"})


def import_onnx(model: onnx.ModelProto | str | Path, *, name: str = "") -> fx.GraphModule:
    """An ONNX model (a file or a parsed ModelProto) as an IR GraphModule: one (1, C, H, W) input, one output.

    Raises FrontendError naming the model (and the node, where one is at fault) for unreadable files,
    graphs that are not one 4-D image in and one tensor out, and ops the engine cannot express.
    """
    if not isinstance(model, onnx.ModelProto):
        name = name or Path(model).name
        model = _load(Path(model))
    name = name or model.graph.name or "model.onnx"
    image = _check_signature(model, name)
    builder = Builder(name, _opset(model), _static_shapes(model),
                      Counter(i for node in model.graph.node for i in node.input))
    for initializer in model.graph.initializer:
        builder.values[initializer.name] = numpy_helper.to_array(initializer)
    placeholder = builder.graph.placeholder(builder.unique(image.name))
    placeholder.meta.update(rank=4, onnx_name=image.name)
    builder.values[image.name] = placeholder
    for node in model.graph.node:
        builder.node = node
        for output, value in zip(node.output, _import_node(builder, node)):
            if output:
                builder.values[output] = value
    result = builder.settled(builder.values.get(model.graph.output[0].name))
    if not isinstance(result, fx.Node):
        raise FrontendError(f"{name}: the output {model.graph.output[0].name!r} is not a tensor computed from "
                            f"the input")
    builder.graph.output(result)
    graph_module = fx.GraphModule(builder.root, builder.graph, class_name="OnnxGraph")
    graph_module.graph.eliminate_dead_code()  # pattern leftovers: GELU's division
    graph_module.delete_all_unused_submodules()
    graph_module.recompile()
    lift_spelled_out_activations(graph_module)  # torch.onnx writes SiLU as x * sigmoid(x)
    return graph_module.eval()


def _load(path: Path) -> onnx.ModelProto:
    try:
        model = onnx.load_model_from_string(path.read_bytes())
        if any(onnx.external_data_helper.uses_external_data(t) for t in model.graph.initializer):
            onnx.external_data_helper.load_external_data_for_model(model, str(path.parent))
    except Exception as err:  # DecodeError, OSError, onnx's checks on external data paths
        raise FrontendError(f"{path.name}: not a readable ONNX model ({type(err).__name__}: {err})") from err
    return model


def _opset(model: onnx.ModelProto) -> int:
    versions = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    return versions[0] if versions else 1


def _check_signature(model: onnx.ModelProto, name: str) -> onnx.ValueInfoProto:
    """The one image input, after checking: one input (N, C, H, W) float with C fixed, one output."""
    initializers = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in initializers]
    if not model.graph.node or len(inputs) != 1:
        raise FrontendError(f"{name}: the graph has {len(inputs)} inputs and {len(model.graph.node)} nodes; "
                            f"leanseg needs one image input (1, C, H, W)")
    if len(model.graph.output) != 1:
        raise FrontendError(f"{name}: the graph has {len(model.graph.output)} outputs; leanseg needs one "
                            f"(1, K, H, W) logits output")
    tensor_type = inputs[0].type.tensor_type
    dims = tensor_type.shape.dim
    if len(dims) != 4 or not dims[1].HasField("dim_value"):
        shown = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in dims]
        raise FrontendError(f"{name}: input {inputs[0].name!r} has shape {shown}; leanseg needs (N, C, H, W) "
                            f"with a fixed channel count C")
    if tensor_type.elem_type != onnx.TensorProto.FLOAT:
        raise FrontendError(f"{name}: input {inputs[0].name!r} is "
                            f"{onnx.TensorProto.DataType.Name(tensor_type.elem_type)}; leanseg feeds float32")
    return inputs[0]


def _static_shapes(model: onnx.ModelProto) -> dict[str, list[int | None]]:
    """Value name -> dims that ONNX shape inference fixes for every input size (None where it cannot)."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # inference is a help only: without it every size is read at run time
        inferred = model
    shapes: dict[str, list[int | None]] = {}
    graph = inferred.graph
    for info in [*graph.input, *graph.value_info, *graph.output]:
        if info.type.tensor_type.HasField("shape"):
            shapes[info.name] = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None
                                 for d in info.type.tensor_type.shape.dim]
    return shapes


def _import_node(b: Builder, node: onnx.NodeProto) -> list[Value]:
    """The IR values of the node's outputs (the first; later ones are only allowed when unused)."""
    op = node.op_type
    if node.domain not in ("", "ai.onnx") or op not in SUPPORTED:
        raise b.error(f"is not supported; supported: {', '.join(SUPPORTED)}")
    attrs = attributes(node)
    if op == "Constant":
        return [_constant(b, attrs)]
    inputs = [b.value(i) for i in range(len(node.input))]
    present = [v for v in inputs if v is not None]
    if op in PASS_THROUGH:
        return [inputs[0]] if inputs[0] is not None else []
    if op in FOLDERS and present and all(isinstance(v, np.ndarray) for v in present):
        return [np.asarray(FOLDERS[op](b, inputs, attrs))]
    sizes_only = all(isinstance(v, (np.ndarray, Dims)) for v in present) and any(isinstance(v, Dims) for v in present)
    if op in DIMS_OPS and (op == "Shape" or sizes_only):
        return [DIMS_OPS[op](b, attrs)]
    if op not in HANDLERS:
        raise b.error("is supported on constants known at import time only")
    result = HANDLERS[op](b, attrs)
    return result if isinstance(result, list) else [result]  # Split has an output per part


def _constant(b: Builder, attrs: dict[str, Any]) -> np.ndarray:
    for key, dtype in (("value", None), ("value_float", np.float32), ("value_floats", np.float32),
                       ("value_int", np.int64), ("value_ints", np.int64)):
        if key in attrs:
            return np.asarray(attrs[key], dtype=dtype)
    raise b.error(f"holds {', '.join(attrs)}; only numeric constants are supported")
