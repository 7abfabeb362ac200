"""The torch.export front end end to end: nets that carry each pattern public segmentation models are
built from, exported to a `.pt2` (height and width any multiple of 32), re-loaded with `load_model`,
compiled, and compared with the original eager module at two sizes (one not a multiple of 32)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, fx, nn

from leanseg.core.engine import compile
from leanseg.core.engine.bands import BandedInvertedResidual
from leanseg.core.engine.capture import capture_by_export
from leanseg.core.engine.chain import BandedChain
from leanseg.core.engine.frontends.export_lift import lift_exported_program
from leanseg.core.engine.frontends.ir import OutsideCapturedSizes
from leanseg.core.engine.fuse import ConvAct
from leanseg.core.engine.merge_bands import UpsampleAdd
from leanseg.core.model.bundle import save_bundle
from leanseg.core.model.graph_model import GraphModel
from leanseg.core.model.pt2_file import load_exported_program
from leanseg.core.model.sources import load_model

from . import export_nets as nets

pytestmark = pytest.mark.usefixtures("one_torch_thread")
SIZES = ((64, 96), (70, 90))  # 70x90 is padded to 96x96 by the GraphModel and cropped back


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("pt2")
    return {name: nets.export_pt2(nets.made(name), folder / f"{name}.pt2", nets.LOWEST_COLUMNS.get(name, 1))
            for name in nets.CASES}


def eager_reference(model: nn.Module, x: Tensor, multiple: int = 32) -> Tensor:
    """The original module on the input zero-padded (bottom, right) to the multiple, cropped back."""
    height, width = x.shape[2:]
    with torch.inference_mode():
        return model(F.pad(x, (0, (-width) % multiple, 0, (-height) % multiple)))[..., :height, :width]


def kinds(graph_module: fx.GraphModule) -> set[str]:
    names = set()
    for node in graph_module.graph.nodes:
        if node.op == "call_module":
            names.add(type(graph_module.get_submodule(node.target)).__name__)
        elif node.op == "call_function":
            names.add(getattr(node.target, "__name__", str(node.target)))
    return names


@pytest.mark.parametrize("name", list(nets.CASES))
def test_reloaded_program_compiles_and_equals_eager(name: str, exported: dict[str, Path]) -> None:
    model = nets.made(name)
    loaded = load_model(exported[name])
    assert isinstance(loaded.model, GraphModel)
    # The program holds for multiples of 32 only (the 2x2 ConvTranspose2d weight is no feature map of stride 128)
    assert loaded.info.config.size_multiple == 32
    plan = compile(loaded.model, device="cpu")
    assert not plan.fallbacks, plan.fallbacks
    for height, width in SIZES:
        x = torch.randn(1, 3, height, width, generator=torch.Generator().manual_seed(height))
        expected = eager_reference(model, x)
        logits = plan.run(x, output="logits")
        assert logits.shape == expected.shape == (1, logits.shape[1], height, width)
        assert (logits - expected).abs().max().item() <= 1e-4, (name, height, width)
        labels = plan.run(x, output="labels")[0].long()
        top2 = expected[0].topk(2, dim=0).values
        clear = (top2[0] - top2[1]) > 1e-4  # pixels whose top two logits do not tie
        assert clear.float().mean().item() > 0.95
        assert torch.equal(labels[clear], expected[0].argmax(0)[clear]), (name, height, width)
        assert len(labels.unique()) > 1  # a comparison that could fail


def test_shape_branch_defeats_torch_fx_but_not_export(exported: dict[str, Path]) -> None:
    with pytest.raises(Exception, match="symbolically traced variables cannot be used as inputs to control flow"):
        fx.symbolic_trace(nets.made("shape_branch"))
    lifted = lift_exported_program(load_exported_program(exported["shape_branch"]))
    x = torch.rand(1, 3, 64, 128)
    with torch.inference_mode():
        assert (lifted(x) - nets.made("shape_branch")(x)).abs().max().item() <= 1e-5


def test_sizes_outside_the_exported_program_are_refused_in_one_line(exported: dict[str, Path]) -> None:
    """The program was exported for widths 96..2048, multiples of 32: the lifted graph checks both; the model
    pads narrower images up to the width it holds from, found when it is loaded."""
    lifted = lift_exported_program(load_exported_program(exported["shape_branch"]))
    with pytest.raises(OutsideCapturedSizes, match=r"^the program was exported for heights 32\.\.2048 and widths "
                                                   r"96\.\.2048 px, not height 64 and width 64 \(.*the Dim min/max "
                                                   r".*or a branch"):
        lifted(torch.rand(1, 3, 64, 64))  # the branch the export did not take
    with pytest.raises(OutsideCapturedSizes, match=r"^the program was exported for heights that divide by 32 .*"
                                                   r"not height 48 and width 96$"):
        lifted(torch.rand(1, 3, 48, 96))
    with pytest.raises(OutsideCapturedSizes, match=r"^shape_branch\.pt2 was exported for .* "
                                                   r"not height 2080 and width 96 .*"
                                                   r"export it again with a larger max$"):
        load_model(exported["shape_branch"]).model.net(torch.rand(1, 3, 2080, 96))  # the file names itself
    model = load_model(exported["shape_branch"]).model
    assert isinstance(model, GraphModel) and model.min_size == (0, 96)
    plan = compile(model, device="cpu")
    x = torch.rand(1, 3, 50, 60)
    expected = lifted(F.pad(x, (0, 96 - 60, 0, 64 - 50)))[..., :50, :60]  # padded to 64x96, the branch it holds
    assert (plan.run(x, output="logits") - expected).abs().max().item() <= 1e-4


@pytest.mark.parametrize(("name", "expected"), [
    ("se_block", {"Hardsigmoid", "Hardswish", "AdaptiveAvgPool2d", "mul"}),
    ("functional_static_padding", {"Conv2d", "pad", "SiLU"}),
    ("fpn_merge", {"GroupNorm", "interpolate", "add"}),
    ("aspp", {"cat", "dim_size", "interpolate", "AdaptiveAvgPool2d"}),
    ("resnet_basic", {"Conv2d", "BatchNorm2d", "ReLU", "add"}),
    ("convnext_unet", {"ChannelLayerNorm", "GELU", "interpolate"}),
    ("channel_splits", {"split", "getitem", "sum", "reshape"}),
])
def test_aten_ops_are_lifted_to_layers(name: str, expected: set[str], exported: dict[str, Path]) -> None:
    lifted = lift_exported_program(load_exported_program(exported[name]))
    found = kinds(lifted)
    assert expected <= found, found
    aten_left = {kind for kind in found if "." in kind}  # an aten op's name is "op.overload"
    assert not aten_left, found
    if name == "convnext_unet":  # the empty feature is dropped, and the concatenation of one tensor with it
        assert "cat" not in found
    if name == "functional_static_padding":  # F.conv2d became modules: 3 convs + the head, no functional call
        assert sum(isinstance(m, nn.Conv2d) for m in lifted.modules()) == 4


def test_the_unet_ends_in_a_banded_tail_over_the_virtual_concatenation(exported: dict[str, Path]) -> None:
    plan = compile(load_model(exported["unet"]).model, device="cpu")
    assert any(note.startswith("labels-out tail: 3 stages") for note in plan.notes), plan.notes
    assert "2 resizes to another tensor's size are integer scales" in plan.notes
    assert plan.graph_module is not None
    chains = [m for m in plan.graph_module.modules() if isinstance(m, BandedChain)]
    assert len(chains) == 1 and chains[0].sources == 2  # d0a reads cat(upsample(y), s0) band by band


@pytest.mark.parametrize(("size", "band_bytes"), [(256, 2**18), (512, None)])
def test_the_tail_never_holds_full_size_logits_or_the_last_decoder_map(
        size: int, band_bytes: int | None, exported: dict[str, Path]) -> None:
    """TinyUNet's tail (3x3 conv over the skip concat, 3x3 conv, 3x3 head) at full resolution: in bands the
    tail step holds less than the full-size logits plus the last decoder map, which the unbanded plan makes."""
    model = load_model(exported["unet"]).model
    plan, whole = compile(model, device="cpu"), compile(model, device="cpu", head=False)
    assert plan.graph_module is not None
    chain = next(m for m in plan.graph_module.modules() if isinstance(m, BandedChain))
    if band_bytes is not None:  # a small budget: bands as few rows as it allows
        chain.band_bytes, chain.min_rows = band_bytes, 1
    x = torch.rand(1, 3, size, size)
    labels, expected = plan.run(x), whole.run(x)
    assert plan.last_stats is not None and whole.last_stats is not None
    assert torch.equal(labels, expected)
    full_maps = (5 + 8) * size * size * 4  # logits (5 classes) + the last decoder map (8 channels), fp32
    steps = plan.last_stats.steps
    tail = next(i for i, step in enumerate(steps) if step.name.endswith("_banded_tail"))
    held_by_tail = steps[tail].peak_bytes - steps[tail - 1].live_bytes  # its bands and its labels
    assert held_by_tail < 0.5 * full_maps, (held_by_tail, full_maps)
    assert plan.last_stats.peak_bytes < whole.last_stats.peak_bytes
    assert plan.estimate_peak(tuple(x.shape)) == plan.last_stats.peak_bytes


def test_a_resnet_stem_and_its_skip_never_exist_whole(exported: dict[str, Path]) -> None:
    """The stem (7x7 stride-2 conv, ReLU, max pool) runs in bands and the decoder recomputes the stem's rows
    from the image for its skip: after the stem step only the image and the pooled map are held."""
    model = load_model(exported["resnet_unet"]).model
    plan, unbanded = compile(model, device="cpu"), compile(model, device="cpu", bands=False)
    assert "1 skips that are one conv of the image recomputed per band" in plan.notes, plan.notes
    assert "stem: 2 steps from the image to its first pool in row bands" in plan.notes, plan.notes
    assert plan.graph_module is not None
    for chain in plan.graph_module.modules():
        if isinstance(chain, BandedChain):
            chain.band_bytes = 2**18  # several bands at this small size
    x = torch.rand(1, 3, 256, 256)
    logits, expected = plan.run(x, output="logits"), unbanded.run(x, output="logits")
    assert (logits - expected).abs().max().item() <= 1e-4
    assert plan.last_stats is not None and unbanded.last_stats is not None
    stem = next(step for step in plan.last_stats.steps if step.name.endswith("_banded_stem"))
    image, pooled, stem_output = 3 * 256 * 256 * 4, 16 * 64 * 64 * 4, 16 * 128 * 128 * 4
    assert image + pooled <= stem.live_bytes < image + pooled + 1024  # (and a shape read's few bytes)
    assert stem.peak_bytes < image + pooled + stem_output / 2  # bands of the stem's output, never all of it
    assert plan.last_stats.peak_bytes < unbanded.last_stats.peak_bytes - stem_output / 2
    assert plan.estimate_peak(tuple(x.shape), output="logits") == plan.last_stats.peak_bytes
    assert torch.equal(plan.run(x), unbanded.run(x))
    assert plan.estimate_peak(tuple(x.shape)) == plan.last_stats.peak_bytes


def test_fpn_groupnorm_in_place_and_upsampled_branches_added_band_by_band(exported: dict[str, Path]) -> None:
    """GroupNorm(+ReLU) overwrites its input where it dies there; each upsampled branch of the merge is added
    into the running sum band by band: neither step holds a second map of the merge's size."""
    plan = compile(load_model(exported["fpn_merge"]).model, device="cpu")
    assert "1 GroupNorm (+ activation) steps normalise in place" in plan.notes, plan.notes
    assert "4 sums with an upsampled map add its rows band by band" in plan.notes, plan.notes  # 2 top-down, 2 merge
    assert plan.graph_module is not None
    for module in plan.graph_module.modules():
        if isinstance(module, UpsampleAdd):
            module.band_bytes = 2**16  # several bands at this small size
    x = torch.rand(1, 3, 512, 512)
    plan.run(x, output="logits")
    assert plan.last_stats is not None
    steps = plan.last_stats.steps
    merge_map = 16 * 128 * 128 * 4  # 16 channels at stride 4, fp32
    for index, step in enumerate(steps):
        if step.name.endswith(("norm", "_upsample_add")):
            assert step.peak_bytes - steps[index - 1].live_bytes < merge_map / 2, (step.name, steps[index - 1])
    assert sum(step.name.endswith("_upsample_add") for step in steps) == 4
    assert plan.estimate_peak(tuple(x.shape), output="logits") == plan.last_stats.peak_bytes


def test_channel_layer_norms_are_per_pixel_steps_and_survive_a_bundle(exported: dict[str, Path],
                                                                     tmp_path: Path) -> None:
    """timm's permute -> layer_norm -> permute is one ChannelLayerNorm: banded like an activation, kept as a
    module by a retrace and by a `.leanseg` bundle; the empty stride-2 feature is no node at all."""
    model = nets.made("convnext_unet")
    bundle = load_model(save_bundle(load_model(exported["convnext_unet"]), tmp_path / "convnext.leanseg"))
    x = torch.randn(1, 3, 256, 192, generator=torch.Generator().manual_seed(1))
    expected = eager_reference(model, x)
    for loaded in (load_model(exported["convnext_unet"]), bundle):
        assert kinds(loaded.model.net) >= {"ChannelLayerNorm"}
        plan = compile(loaded.model, device="cpu", memory_budget=2**20)
        assert not plan.fallbacks, plan.fallbacks
        assert (plan.run(x, output="logits") - expected).abs().max().item() <= 1e-4


@pytest.mark.parametrize("size", [(256, 192), (250, 190)])
def test_a_zero_pad_before_a_depthwise_is_made_band_by_band(size: tuple[int, int], exported: dict[str, Path]) -> None:
    """EfficientNet's static "same" pad (asymmetric at stride 2) no longer copies the expanded map whole: the
    blocks band, each band padding the rows and columns it reads, in many bands (a small budget)."""
    model = nets.made("static_pad_mbconv")
    plan = compile(load_model(exported["static_pad_mbconv"]).model, device="cpu", memory_budget=2**20)
    assert plan.graph_module is not None
    assert not [n for n in plan.graph_module.graph.nodes if n.target is F.pad]
    padded = [m.zero_pad for m in plan.graph_module.modules() if isinstance(m, BandedInvertedResidual)]
    assert sorted(p for p in padded if p is not None) == [(0, 1, 0, 1), (2, 2, 2, 2)]
    x = torch.randn(1, 3, *size, generator=torch.Generator().manual_seed(size[1]))
    assert (plan.run(x, output="logits") - eager_reference(model, x)).abs().max().item() <= 1e-4


def test_spelled_out_activations_become_one_fused_module(exported: dict[str, Path]) -> None:
    """x * sigmoid(x) and x * hardsigmoid(x): each one activation fused into its conv, no gate map beside x."""
    plan = compile(load_model(exported["spelled_out_activations"]).model, device="cpu")
    assert "2 spelled-out activations (x * sigmoid(x)) made one module" in plan.notes
    assert plan.graph_module is not None
    activations = sorted(str(m.activation) for m in plan.graph_module.modules() if isinstance(m, ConvAct))
    assert "hardswish" in activations and "silu" in activations, activations
    assert not ({"mul", "sigmoid", "hardsigmoid", "Sigmoid", "Hardsigmoid"} & kinds(plan.graph_module))


def test_a_bundle_of_the_program_keeps_its_size_checks(exported: dict[str, Path], tmp_path: Path) -> None:
    """`.pt2` -> `.leanseg` bundle (the IR graph as data): the size ranges and multiples travel with it."""
    bundle = load_model(save_bundle(load_model(exported["shape_branch"]), tmp_path / "branch.leanseg"))
    assert isinstance(bundle.model, GraphModel) and bundle.info.config.size_multiple == 32
    with pytest.raises(OutsideCapturedSizes, match="divide by 32"):
        bundle.model.net(torch.rand(1, 3, 48, 96))
    x = torch.randn(1, 3, 70, 90)
    with torch.inference_mode():
        assert (bundle.model(x) - eager_reference(nets.made("shape_branch"), x)).abs().max().item() <= 1e-4


def test_a_module_fx_cannot_trace_is_captured_through_export() -> None:
    """compile(nn.Module) itself: the shape branch goes through torch.export; a size whose branch the capture
    did not take (width 64) runs the module eagerly, the plan says so."""
    model = nets.made("shape_branch")
    plan = compile(model, device="cpu")
    assert "<whole model>" not in plan.fallbacks and plan.fallbacks == []
    assert any("holds for some input sizes only" in note for note in plan.notes)
    lifted = capture_by_export(model)  # leanseg's own capture: its range can only come from the branch
    with pytest.raises(OutsideCapturedSizes,
                       match=r"^the captured graph holds for .* not height 64 and width 64 \(the model branches"):
        lifted(torch.rand(1, 3, 64, 64))
    # the tiler's estimate of a size the capture does not hold for: the one it does, scaled by the pixel count
    outside, inside = plan.estimate_peak((1, 3, 64, 64)), plan.estimate_peak((1, 3, 64, 128))
    assert 0 < outside and abs(2 * outside - inside) <= inside // 4, (outside, inside)
    for size, eager in (((64, 96), False), ((64, 64), True)):
        x = torch.randn(1, 3, *size)
        logits = plan.run(x, output="logits")
        assert plan.last_stats is not None
        assert (plan.last_stats.steps[-1].name == "model") == eager, size
        with torch.inference_mode():
            assert (logits - model(x)).abs().max().item() <= 1e-4
