"""Two graph passes alone: resizes to another tensor's size that are an integer scale become scale_factor
resizes (sizes_to_scales), and shape reads and sums move next to their inputs so values die sooner
(run_consumers_early): the peak drops, the result does not change."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, fx, nn

from leanseg.core.engine import compile
from leanseg.core.engine.capture import capture
from leanseg.core.engine.frontends.ir import dim_size
from leanseg.core.engine.frontends.onnx_import import import_onnx
from leanseg.core.engine.plan import Plan
from leanseg.core.engine.schedule import full_size_term_first, run_consumers_early
from leanseg.core.engine.shapes import sizes_to_scales, value_shapes
from leanseg.core.model.padding import crop_like, pad_to_multiple

from .export_nets import PyramidMerge, export_onnx

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class ResizeToSkip(nn.Module):
    """Upsample a map to the size of another (smp's U-Net decoder): `ratio` sets which one."""

    def __init__(self, ratio: str) -> None:
        super().__init__()
        self.ratio = ratio
        self.skip = nn.Conv2d(3, 4, 3, padding=0 if ratio == "varying" else 1)
        self.down = nn.Conv2d(3 if ratio == "varying" else 4, 4, 3, stride=2, padding=1)

    def forward(self, x: Tensor) -> Tensor:
        padded = pad_to_multiple(x, 8) if self.ratio != "no_multiple" else x
        skip = self.skip(padded)  # full size; two rows and columns less when the ratio varies
        y = F.relu(self.down(padded if self.ratio == "varying" else skip))  # half size
        if self.ratio == "half":  # skip resized to y's size: a ratio of 1/2
            return crop_like(F.interpolate(skip, size=(dim_size(y, 2), dim_size(y, 3)), mode="nearest") + y, y)
        up = F.interpolate(y, size=(dim_size(skip, 2), dim_size(skip, 3)), mode="bilinear", align_corners=False)
        return crop_like(up + skip, x)


def resizes(graph_module: fx.GraphModule) -> list[fx.Node]:
    return [n for n in graph_module.graph.nodes if n.op == "call_function" and n.target is F.interpolate]


def test_a_resize_to_twice_its_input_becomes_a_scale() -> None:
    model = ResizeToSkip("double").eval()
    graph_module = capture(model)
    assert sizes_to_scales(graph_module, 3) == 1
    (resize,) = resizes(graph_module)
    assert resize.kwargs["scale_factor"] == 2.0 and resize.kwargs["size"] is None
    assert not any(n.target is dim_size for n in graph_module.graph.nodes)  # the size reads are gone
    x = torch.randn(1, 3, 37, 45)
    with torch.inference_mode():
        assert torch.allclose(graph_module(x), model(x), atol=1e-6)


@pytest.mark.parametrize("ratio", ["half", "varying", "no_multiple"])
def test_resizes_that_are_no_integer_scale_keep_their_size(ratio: str) -> None:
    """A ratio of 1/2, a ratio that changes with the size (a valid conv's size), or no pad_to_multiple node
    (the pass cannot pick sizes the graph holds for): the size stays."""
    model = ResizeToSkip(ratio).eval()
    graph_module = capture(model)
    assert sizes_to_scales(graph_module, 3) == 0
    (resize,) = resizes(graph_module)
    assert resize.kwargs.get("scale_factor") is None and isinstance(resize.kwargs["size"], tuple)
    x = torch.randn(1, 3, 40, 48)
    with torch.inference_mode():
        assert torch.allclose(graph_module(x), model(x), atol=1e-6)


def test_value_shapes_runs_on_meta_tensors() -> None:
    graph_module = capture(ResizeToSkip("double").eval())
    shapes = value_shapes(graph_module, (1, 3, 37, 45))
    assert shapes["pad_to_multiple"] == (1, 3, 40, 48)
    assert shapes["relu"] == (1, 4, 20, 24)
    assert shapes["interpolate"] == (1, 4, 40, 48)
    assert shapes["crop_like"] == (1, 4, 37, 45)


class FourBranchSum(nn.Module):
    """Four full-size branches summed after all are built (an FPN's merge)."""

    def __init__(self) -> None:
        super().__init__()
        self.branches = nn.ModuleList(nn.Conv2d(3, 16, 3, padding=1) for _ in range(4))
        self.head = nn.Conv2d(16, 4, 1)

    def forward(self, x: Tensor) -> Tensor:
        a, b, c, d = (branch(x) for branch in self.branches)
        return self.head(a + b + c + d)


class LateSizeRead(nn.Module):
    """A big map whose size is read only at the very end: it would stay alive through the decoder."""

    def __init__(self) -> None:
        super().__init__()
        self.big, self.small = nn.Conv2d(3, 16, 3, padding=1), nn.Conv2d(16, 8, 3, stride=2, padding=1)
        self.mid = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x: Tensor) -> Tensor:
        y = self.big(x)
        z = F.interpolate(self.mid(F.relu(self.small(y))), scale_factor=2.0, mode="nearest")
        return F.interpolate(z, size=(dim_size(y, 2), dim_size(y, 3)), mode="nearest")


def peak_and_result(graph_module: fx.GraphModule, x: Tensor) -> tuple[int, Tensor]:
    plan = Plan(graph_module, None, device=torch.device("cpu"), dtype=torch.float32, notes=[], fallbacks=[])
    result = plan.run(x, output="logits")
    assert plan.last_stats is not None
    return plan.last_stats.peak_bytes, result


X_BYTES, MAP_BYTES = 3 * 64 * 80 * 4, 16 * 64 * 80 * 4  # the input; one full-size 16-channel map
UP_BYTES, SMALL_BYTES = 8 * 64 * 80 * 4, 8 * 32 * 40 * 4  # LateSizeRead's upsampled and half-size maps


@pytest.mark.parametrize(("net", "moved", "early_at_most", "written_at_least"), [
    (FourBranchSum, 2, X_BYTES + 2 * MAP_BYTES, X_BYTES + 4 * MAP_BYTES),  # a running total: two maps, not four
    (LateSizeRead, 2, X_BYTES + MAP_BYTES, MAP_BYTES + SMALL_BYTES + UP_BYTES),  # the big map dies after `small`
])
def test_running_consumers_early_lowers_the_peak(net: type[nn.Module], moved: int, early_at_most: int,
                                                 written_at_least: int) -> None:
    torch.manual_seed(0)
    model = net().eval()
    x = torch.randn(1, 3, 64, 80)
    as_written, early = capture(model), capture(model)
    assert run_consumers_early(early.graph) == moved
    early.graph.lint()
    early.recompile()
    peak_written, result_written = peak_and_result(as_written, x)
    peak_early, result_early = peak_and_result(early, x)
    with torch.inference_mode():
        expected = model(x)
    assert (result_early - expected).abs().max().item() <= 1e-5
    assert (result_written - expected).abs().max().item() <= 1e-5
    assert peak_early <= early_at_most < written_at_least <= peak_written, (peak_early, peak_written)


def test_sums_run_as_a_running_total() -> None:
    graph_module = capture(FourBranchSum().eval())
    run_consumers_early(graph_module.graph)
    order = [n.name for n in graph_module.graph.nodes if n.op in ("call_module", "call_function")]
    assert order == ["branches_0", "branches_1", "add", "branches_2", "add_1", "branches_3", "add_2", "head"]
    assert run_consumers_early(graph_module.graph) == 0  # already in place


def test_compile_applies_both_passes() -> None:
    plan = compile(FourBranchSum().eval(), device="cpu")
    assert "2 shape reads and sums moved next to their inputs" in plan.notes
    plan = compile(ResizeToSkip("double").eval(), device="cpu")
    assert "1 resizes to another tensor's size are integer scales" in plan.notes


def test_a_sum_of_branches_starts_from_its_full_size_branch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The full-size branch is computed first and the upsampled ones are added into it band by band: no
    upsampled branch exists whole, so the peak is lower than summing in the model's order. The coarsest
    level's narrowing conv (it is that level's last reader) runs before the full-size branch."""
    torch.manual_seed(0)
    model = PyramidMerge().eval()
    x = torch.randn(1, 3, 64, 80)
    with torch.inference_mode():
        expected = model(x)
    plan = compile(model, device="cpu")
    assert "1 sums of branches start from a full-size branch, computed first" in plan.notes, plan.notes
    assert plan.graph_module is not None
    order = [n.name for n in plan.graph_module.graph.nodes]
    base_step = next(index for index, name in enumerate(order) if "merge_banded" in name)  # b1 over p1, banded
    assert order.index("b3") < base_step < order.index("b2"), order
    logits = plan.run(x, output="logits")
    assert (logits - expected).abs().max().item() <= 1e-5
    assert plan.last_stats is not None
    peak = plan.last_stats.peak_bytes

    monkeypatch.setattr("leanseg.core.engine.compiler.full_size_term_first", lambda graph_module: 0)
    in_model_order = compile(model, device="cpu")
    assert (in_model_order.run(x, output="logits") - expected).abs().max().item() <= 1e-5
    assert in_model_order.last_stats is not None
    full_map = 16 * 64 * 80 * 4  # one branch at full size, fp32
    assert peak <= in_model_order.last_stats.peak_bytes - full_map / 2, (peak, in_model_order.last_stats.peak_bytes)


def test_sums_of_two_terms_or_of_unresized_terms_keep_their_order() -> None:
    graph_module = capture(FourBranchSum().eval())  # no term is resized
    assert full_size_term_first(graph_module) == 0
    graph_module = capture(ResizeToSkip("double").eval())  # two terms: the add already takes the resize as addend
    sizes_to_scales(graph_module, 3)
    assert full_size_term_first(graph_module) == 0


def test_an_imported_pyramid_merge_is_banded_and_summed_from_its_full_size_branch(tmp_path: Path) -> None:
    """ONNX Resize comes in with a scale per axis, (2.0, 2.0): the merge's conv still builds the upsampled
    level band by band, and the branch sum still starts from the full-size branch."""
    model = PyramidMerge().eval()
    path = tmp_path / "m.onnx"
    export_onnx(model, path)
    plan = compile(import_onnx(path), device="cpu")
    assert "1 convs over an FPN merge (upsample + 1x1 conv) run in row bands" in plan.notes, plan.notes
    assert "1 sums of branches start from a full-size branch, computed first" in plan.notes, plan.notes
    x = torch.rand(1, 3, 64, 96)
    with torch.inference_mode():
        assert (plan.run(x, output="logits") - model(x)).abs().max().item() <= 1e-4
