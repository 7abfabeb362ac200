"""The ONNX front end: small nets that carry each pattern, exported with torch.onnx (dynamic height and
width), imported and compared with eager PyTorch at several sizes; bad files refused with a clear error."""
from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper
from torch import Tensor, fx, nn

from leanseg.core.engine import compile
from leanseg.core.engine.frontends import IR_FUNCTIONS, FrontendError
from leanseg.core.engine.frontends.onnx_import import import_onnx

from .export_nets import ASPP, ChannelSplits, ConvNeXtUNet, PaddingModules
from .nets import randomise_batchnorm

SIZES = ((64, 96), (96, 64), (70, 90))


def conv_bn(cin: int, cout: int, k: int = 3, stride: int = 1, groups: int = 1, dilation: int = 1) -> nn.Sequential:
    pad = dilation * (k - 1) // 2
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, pad, dilation, groups, bias=False), nn.BatchNorm2d(cout))


class ConvChain(nn.Module):
    """conv-BN-ReLU6 x2, a BN the exporter cannot fold (after an add), 1x1 head."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = conv_bn(3, 8, stride=2), conv_bn(8, 8)
        self.bn, self.head = nn.BatchNorm2d(8), nn.Conv2d(8, 5, 1)

    def forward(self, x: Tensor) -> Tensor:
        y = F.relu6(self.a(x))
        return self.head(self.bn(y + F.relu6(self.b(y))))


class DepthwiseSeparable(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = conv_bn(3, 16)
        self.dw, self.pw = conv_bn(16, 16, groups=16), conv_bn(16, 16, 1)
        self.head = nn.Conv2d(16, 4, 1)

    def forward(self, x: Tensor) -> Tensor:
        y = F.relu(self.stem(x))
        return self.head(y + self.pw(F.relu6(self.dw(y))))


class SqueezeExcite(nn.Module):
    """MobileNetV3's block: expand, Hardswish, depthwise, SE (pool, ReLU, Hardsigmoid) and a mean-pool SE."""

    def __init__(self) -> None:
        super().__init__()
        self.expand, self.dw = conv_bn(3, 24, 1), conv_bn(24, 24, groups=24)
        self.fc1, self.fc2 = nn.Conv2d(24, 8, 1), nn.Conv2d(8, 24, 1)
        self.pool, self.gate = nn.AdaptiveAvgPool2d(1), nn.Hardsigmoid()
        self.fc3 = nn.Conv2d(24, 24, 1)
        self.head = nn.Conv2d(24, 4, 1)

    def forward(self, x: Tensor) -> Tensor:
        y = F.hardswish(self.dw(F.hardswish(self.expand(x))))
        y = y * self.gate(self.fc2(F.relu(self.fc1(self.pool(y)))))
        y = y * torch.sigmoid(self.fc3(y.mean((2, 3), keepdim=True)))
        return self.head(y)


class StaticPadding(nn.Module):
    """EfficientNet's "same" padding by F.pad (asymmetric), a reflect pad, an asymmetric max pool."""

    def __init__(self) -> None:
        super().__init__()
        self.down, self.conv = nn.Conv2d(3, 8, 3, 2), nn.Conv2d(8, 8, 3)
        self.pool, self.head = nn.MaxPool2d(2, 1), nn.Conv2d(8, 4, 1)

    def forward(self, x: Tensor) -> Tensor:
        y = F.silu(self.down(F.pad(x, (0, 1, 0, 1))))
        y = F.gelu(self.conv(F.pad(y, (1, 1, 1, 1), mode="reflect")))
        return self.head(self.pool(F.pad(y, (0, 1, 1, 0), value=-1.0)))


class Dilated(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = conv_bn(3, 8, dilation=2), conv_bn(8, 8, dilation=4)
        self.head = nn.Conv2d(8, 4, 3, padding=3, dilation=3)

    def forward(self, x: Tensor) -> Tensor:
        return torch.softmax(self.head(F.leaky_relu(self.b(torch.tanh(self.a(x))), 0.1)), dim=1)


class Transposed(nn.Module):
    """A learned 2x upsample (ConvTranspose2d) back to the input's size, then sigmoid probabilities."""

    def __init__(self) -> None:
        super().__init__()
        self.down = conv_bn(3, 8, stride=2)
        self.up = nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1)

    def forward(self, x: Tensor) -> Tensor:
        return torch.sigmoid(self.up(F.relu(self.down(x))))


class FPNMerge(nn.Module):
    """Top-down merge: nearest 2x upsample + lateral skip, GroupNorm, smp's stack-and-sum, bilinear 2x."""

    def __init__(self) -> None:
        super().__init__()
        self.c1, self.c2 = conv_bn(3, 8, stride=2), conv_bn(8, 16, stride=2)
        self.lateral, self.top = nn.Conv2d(8, 16, 1), nn.Conv2d(16, 16, 1)
        self.norm = nn.GroupNorm(4, 16)
        self.head = nn.Conv2d(16, 4, 1)

    def forward(self, x: Tensor) -> Tensor:
        c1 = F.relu(self.c1(x))
        c2 = F.relu(self.c2(c1))
        p1 = F.interpolate(self.top(c2), scale_factor=2, mode="nearest") + self.lateral(c1)
        p1 = F.relu(self.norm(p1))
        merged = torch.stack([p1, self.lateral(c1)]).sum(dim=0)
        return F.interpolate(self.head(merged), scale_factor=4, mode="bilinear", align_corners=True)


class ResNetBasic(nn.Module):
    """Stem, max pool, a basic block and a downsampling basic block (1x1 stride-2 shortcut)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem, self.pool = conv_bn(3, 8, 7, 2), nn.MaxPool2d(3, 2, 1)
        self.a1, self.a2 = conv_bn(8, 8), conv_bn(8, 8)
        self.b1, self.b2, self.short = conv_bn(8, 16, stride=2), conv_bn(16, 16), conv_bn(8, 16, 1, 2)
        self.head = nn.Conv2d(16, 4, 1)

    def forward(self, x: Tensor) -> Tensor:
        y = self.pool(F.relu(self.stem(x)))
        y = F.relu(y + self.a2(F.relu(self.a1(y))))
        y = F.relu(self.short(y) + self.b2(F.relu(self.b1(y))))
        return self.head(y)


class UpsampleToInput(nn.Module):
    """A stride-4 encoder whose logits are resized to the input's size: bilinear, and nearest via sizes."""

    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.Sequential(conv_bn(3, 8, stride=2), nn.ReLU(), conv_bn(8, 8, stride=2), nn.ReLU6())
        self.head = nn.Conv2d(8, 4, 1)

    def forward(self, x: Tensor) -> Tensor:
        logits = self.head(self.enc(x))
        half = F.interpolate(logits, size=(x.shape[2] // 2, x.shape[3] // 2), mode="nearest")
        return F.interpolate(half, size=x.shape[-2:], mode="bilinear", align_corners=False)


class GhostSlice(nn.Module):
    """GhostNet's module: a primary conv and a cheap depthwise one concatenated, then the first C channels
    kept (a Slice of a tensor by constants)."""

    def __init__(self) -> None:
        super().__init__()
        self.primary, self.cheap = conv_bn(3, 6), conv_bn(6, 6, groups=6)
        self.head = nn.Conv2d(5, 4, 1)

    def forward(self, x: Tensor) -> Tensor:
        y = F.relu(self.primary(x))
        return self.head(torch.cat([y, F.relu(self.cheap(y))], dim=1)[:, :5])


CASES: dict[str, tuple[Callable[[], nn.Module], tuple[tuple[int, int], ...]]] = {
    "conv_chain": (ConvChain, SIZES),
    "depthwise_separable": (DepthwiseSeparable, SIZES),
    "squeeze_excite": (SqueezeExcite, SIZES),
    "static_padding": (StaticPadding, SIZES),
    "dilated": (Dilated, SIZES),
    "transposed": (Transposed, SIZES),
    "fpn_merge": (FPNMerge, ((64, 96), (96, 64), (72, 88))),  # two stride-2 levels: multiples of 4
    "aspp": (ASPP, SIZES),
    "resnet_basic": (ResNetBasic, SIZES),
    "upsample_to_input": (UpsampleToInput, SIZES),
    "padding_modules": (PaddingModules, SIZES),  # ONNX Pad in constant, reflect and edge modes
    # LayerNormalization between Transposes; ConstantOfShape of an empty skip, its Shape read and concatenated
    "convnext_unet": (ConvNeXtUNet, ((64, 96), (96, 64), (72, 88))),  # a stride-4 stem: multiples of 4
    "channel_splits": (ChannelSplits, SIZES),  # Split by sizes and in halves, ReduceSum over the radix axis
    "ghost_slice": (GhostSlice, SIZES),
}


def export(model: nn.Module, path: Path, opset: int = 17) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, torch.rand(1, 3, 64, 96), str(path), opset_version=opset, dynamo=False,
                          input_names=["image"], output_names=["logits"],
                          dynamic_axes={"image": {2: "height", 3: "width"}, "logits": {2: "height", 3: "width"}})
    return path


def made(name: str) -> nn.Module:
    torch.manual_seed(0)
    return randomise_batchnorm(CASES[name][0]())


def ir_only(graph_module: fx.GraphModule) -> None:
    for node in graph_module.graph.nodes:
        assert node.op in ("placeholder", "output", "call_module", "call_function", "get_attr"), node.format_node()
        if node.op == "call_function":
            assert node.target in IR_FUNCTIONS, node.format_node()


@pytest.mark.parametrize("name", CASES)
def test_imported_graph_equals_eager_at_every_size(name: str, tmp_path: Path) -> None:
    model = made(name)
    graph_module = import_onnx(export(model, tmp_path / f"{name}.onnx"))
    ir_only(graph_module)
    for height, width in CASES[name][1]:
        x = torch.rand(1, 3, height, width)
        with torch.inference_mode():
            expected, got = model(x), graph_module(x)
        assert got.shape == expected.shape, (height, width)
        assert (got - expected).abs().max().item() <= 1e-4, (name, height, width)


def kinds(graph_module: fx.GraphModule) -> set[str]:
    names = set()
    for node in graph_module.graph.nodes:
        if node.op == "call_module":
            names.add(type(graph_module.get_submodule(node.target)).__name__)
        elif node.op == "call_function":
            names.add(getattr(node.target, "__name__", str(node.target)))
    return names


@pytest.mark.parametrize(("name", "expected"), [
    ("conv_chain", {"Conv2d", "ReLU6", "BatchNorm2d", "add"}),
    ("squeeze_excite", {"Hardswish", "Hardsigmoid", "AdaptiveAvgPool2d", "Sigmoid", "mul"}),
    ("static_padding", {"pad", "SiLU", "GELU", "MaxPool2d"}),
    ("dilated", {"Tanh", "LeakyReLU", "Softmax"}),
    ("transposed", {"ConvTranspose2d", "Sigmoid"}),
    ("fpn_merge", {"GroupNorm", "interpolate", "add"}),
    ("aspp", {"cat", "dim_size", "interpolate"}),
])
def test_patterns_become_standard_modules(name: str, expected: set[str], tmp_path: Path) -> None:
    graph_module = import_onnx(export(made(name), tmp_path / "m.onnx"))
    assert expected <= kinds(graph_module)
    if name == "static_padding":  # x * sigmoid(x) -> SiLU and the erf form -> GELU leave nothing behind
        assert not {"Sigmoid", "truediv", "mul"} & kinds(graph_module)
    if name == "fpn_merge":  # GroupNorm's affine Mul/Add went into the module; the stack-and-sum is adds
        assert not {"mul", "cat"} & kinds(graph_module)


@pytest.mark.parametrize("name", ["conv_chain", "squeeze_excite", "aspp", "upsample_to_input"])
def test_imported_graph_compiles_with_the_engine(name: str, tmp_path: Path) -> None:
    model = made(name)
    plan = compile(import_onnx(export(model, tmp_path / "m.onnx")), device="cpu")
    assert plan.fallbacks == [], plan.fallbacks
    for height, width in ((64, 96), (70, 90)):
        x = torch.rand(1, 3, height, width)
        with torch.inference_mode():
            expected = model(x)
        assert (plan.run(x, output="logits") - expected).abs().max().item() <= 1e-4


# -- hand-built graphs: other opsets, and graphs leanseg must refuse ----------------------------------


def image_input(shape: list[int | str] | None = None, name: str = "image") -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape or [1, 3, "height", "width"])


def graph_model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto], opset: int,
                initializers: dict[str, np.ndarray], outputs: tuple[str, ...] = ("logits",)) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "hand", inputs,
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
                              [numpy_helper.from_array(a, n) for n, a in initializers.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def test_opset_10_clip_attributes_upsample_and_pad_attribute() -> None:
    weight = np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["image", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Clip", ["c"], ["r"], min=0.0, max=6.0),
             helper.make_node("Upsample", ["r", "s"], ["u"], mode="nearest"),
             helper.make_node("Pad", ["u"], ["logits"], pads=[0, 0, 1, 0, 0, 0, 0, 2], value=0.5)]
    model = graph_model(nodes, [image_input()], 10, {"w": weight, "s": np.array([1, 1, 2, 2], np.float32)})
    graph_module = import_onnx(model, name="hand.onnx")
    x = torch.rand(1, 3, 10, 14)
    expected = F.interpolate(F.conv2d(x, torch.from_numpy(weight), padding=1).clamp(0, 6), scale_factor=2)
    expected = F.pad(expected, (0, 2, 1, 0), value=0.5)
    assert (graph_module(x) - expected).abs().max().item() <= 1e-5


def test_opset_18_reduce_mean_axes_as_input() -> None:
    nodes = [helper.make_node("ReduceMean", ["image", "axes"], ["m"], keepdims=1),
             helper.make_node("Mul", ["image", "m"], ["logits"])]
    model = graph_model(nodes, [image_input()], 18, {"axes": np.array([2, 3], np.int64)})
    x = torch.rand(1, 3, 9, 7)
    assert torch.allclose(import_onnx(model)(x), x * x.mean((2, 3), keepdim=True), atol=1e-6)


def test_an_unsupported_op_names_the_node_the_op_and_the_model() -> None:
    nodes = [helper.make_node("Relu", ["image"], ["r"], name="/encoder/Relu"),
             helper.make_node("Cos", ["r"], ["logits"], name="/decoder/Cos")]
    model = graph_model(nodes, [image_input()], 17, {})
    with pytest.raises(FrontendError, match=r"^net\.onnx: node /decoder/Cos \(op Cos\) is not supported; supported: "):
        import_onnx(model, name="net.onnx")


@pytest.mark.parametrize(("inputs", "outputs", "message"), [
    ([image_input(), image_input(name="mask")], ("logits",), "2 inputs"),
    ([image_input([1, 3, 4, "height", "width"])], ("logits",), r"shape \[1, 3, 4, 'height', 'width'\]"),
    ([image_input([1, "channels", "height", "width"])], ("logits",), "fixed channel count"),
    ([image_input()], ("logits", "extra"), "2 outputs"),
])
def test_graphs_that_are_not_one_image_in_one_tensor_out_are_refused(
        inputs: list[onnx.ValueInfoProto], outputs: tuple[str, ...], message: str) -> None:
    nodes = [helper.make_node("Relu", ["image"], ["logits"]), helper.make_node("Relu", ["image"], ["extra"])]
    with pytest.raises(FrontendError, match=message):
        import_onnx(graph_model(nodes, inputs, 17, {}, outputs), name="bad.onnx")


def test_a_truncated_file_is_refused_naming_the_file(tmp_path: Path) -> None:
    whole = export(made("conv_chain"), tmp_path / "whole.onnx").read_bytes()
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(whole[: len(whole) * 2 // 3])
    with pytest.raises(FrontendError, match=r"^truncated\.onnx: not a readable ONNX model"):
        import_onnx(truncated)


def test_a_size_chain_with_an_unsupported_op_names_the_node() -> None:
    nodes = [helper.make_node("Shape", ["image"], ["shape"]),
             helper.make_node("Sqrt", ["shape"], ["root"], name="/odd/Sqrt"),
             helper.make_node("Resize", ["image", "", "", "root"], ["logits"])]
    with pytest.raises(FrontendError, match=r"node /odd/Sqrt \(op Sqrt\)"):
        import_onnx(graph_model(nodes, [image_input()], 17, {}), name="odd.onnx")


def test_hardsigmoid_with_other_coefficients_and_erf_alone() -> None:
    nodes = [helper.make_node("HardSigmoid", ["image"], ["logits"], alpha=0.2, beta=0.5)]
    x = torch.randn(1, 3, 5, 6) * 4
    got = import_onnx(graph_model(nodes, [image_input()], 17, {}))(x)
    assert torch.allclose(got, (0.2 * x + 0.5).clamp(0, 1), atol=1e-6)
    nodes = [helper.make_node("Erf", ["image"], ["logits"], name="/lonely/Erf")]
    with pytest.raises(FrontendError, match=r"/lonely/Erf \(op Erf\).*GELU"):
        import_onnx(graph_model(nodes, [image_input()], 17, {}))


def test_a_size_chain_as_the_dynamo_exporter_writes_it() -> None:
    """Shape slices, a squeeze, integer division, a reshape to [1], a concat: sizes for Resize."""
    nodes = [helper.make_node("Shape", ["image"], ["h1"], start=2, end=3),
             helper.make_node("Squeeze", ["h1", "zero"], ["h"]),
             helper.make_node("Div", ["h", "two"], ["half_h"]),
             helper.make_node("Reshape", ["half_h", "one"], ["half_h1"]),
             helper.make_node("Shape", ["image"], ["w1"], start=-1),
             helper.make_node("Div", ["w1", "two"], ["half_w1"]),
             helper.make_node("Concat", ["batch_channels", "half_h1", "half_w1"], ["sizes"], axis=0),
             helper.make_node("Resize", ["image", "", "", "sizes"], ["logits"], mode="nearest",
                              coordinate_transformation_mode="asymmetric", nearest_mode="floor")]
    constants = {"zero": np.array([0]), "two": np.array(2), "one": np.array([1]), "batch_channels": np.array([1, 3])}
    graph_module = import_onnx(graph_model(nodes, [image_input()], 17, constants))
    assert "dim_size" in kinds(graph_module)
    for height, width in ((9, 13), (20, 6)):
        x = torch.rand(1, 3, height, width)
        assert torch.equal(graph_module(x), F.interpolate(x, size=(height // 2, width // 2), mode="nearest"))


ZOO = Path(__file__).resolve().parents[3] / "out" / "zoo"


@pytest.mark.slow
@pytest.mark.parametrize("path", sorted(ZOO.glob("*.onnx")), ids=lambda p: p.stem)
def test_zoo_models_match_onnx_runtime(path: Path) -> None:
    """Public models (built by ../shared/zoo/build.py, where present) against ONNX Runtime."""
    onnxruntime = pytest.importorskip("onnxruntime")
    graph_module = import_onnx(path)
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = torch.rand(1, 3, 256, 320)
    with torch.inference_mode():
        got = graph_module(x).numpy()
    assert np.abs(got - session.run(None, {"image": x.numpy()})[0]).max() <= 1e-4


def test_external_weights_outside_the_model_folder_are_refused(tmp_path: Path) -> None:
    """An initializer whose external data points at ../secret.bin must not read that file."""
    (tmp_path / "secret.bin").write_bytes(b"\0" * 16)
    (tmp_path / "models").mkdir()
    weight = numpy_helper.from_array(np.zeros((1, 3, 1, 1), np.float32), "w")
    weight.ClearField("raw_data")
    weight.data_location = TensorProto.EXTERNAL
    for key, value in {"location": "../secret.bin", "offset": "0", "length": "12"}.items():
        entry = weight.external_data.add()
        entry.key, entry.value = key, value
    model = graph_model([helper.make_node("Conv", ["image", "w"], ["logits"])], [image_input()], 17, {})
    model.graph.initializer.append(weight)
    path = tmp_path / "models" / "escape.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(FrontendError, match=r"^escape\.onnx: not a readable ONNX model .*outside"):
        import_onnx(path)
