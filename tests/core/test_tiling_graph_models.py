"""Tiling `.pt2` models: the receptive field of an exported graph (size reads, resizes to a skip's size,
padding to the export's multiple of 32) makes exact tiles equal the whole image; a graph with no bounded
field (global pooling) gets fast tiles when the whole image does not fit, never a run over the budget."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from leanseg.core.engine.oom import FaultInjection
from leanseg.core.engine.receptive_field import ReceptiveFieldError, compute_receptive_field
from leanseg.core.engine.tile_plan import FAST_HALO_STRIDES, TilingPlan
from leanseg.core.engine.tiling import ArraySink, array_source, eager_runner, run_tiles
from leanseg.core.events import JobEvent
from leanseg.core.io.images import ImageData
from leanseg.core.model.sources import load_model
from leanseg.core.predict import InferenceOptions, Segmenter
from leanseg.core.segment_tiled import estimate_tile_bytes

from .engine import export_nets as nets

pytestmark = pytest.mark.usefixtures("one_torch_thread")
CPU = torch.device("cpu")
TILEABLE = ("resnet_unet", "classic_unet", "unet", "convnext_unet", "functional_static_padding")


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("tiling_pt2")
    files = {name: nets.export_pt2(nets.made(name), folder / f"{name}.pt2", nets.LOWEST_COLUMNS.get(name, 1))
             for name in (*TILEABLE, "aspp", "shape_branch")}
    files["resnet_unet.onnx"] = nets.export_onnx(nets.made("resnet_unet"), folder / "resnet_unet.onnx")
    return files


@pytest.fixture
def pixels() -> np.ndarray:
    return np.random.default_rng(1).integers(0, 256, (90, 134, 3), dtype=np.uint8)  # not multiples of 32


def normalise(pixels: np.ndarray) -> np.ndarray:
    return (np.moveaxis(pixels, -1, 0).astype(np.float32) / 255.0 - 0.5) / 0.25


@pytest.mark.parametrize("name", (*TILEABLE, "resnet_unet.onnx"))
@pytest.mark.parametrize("tile", [(32, 32), (64, 96)])
def test_exact_tiles_of_an_exported_graph_equal_the_whole_image(exported: dict[str, Path], pixels: np.ndarray,
                                                                name: str, tile: tuple[int, int]) -> None:
    model = load_model(exported[name]).model
    field = compute_receptive_field(model)
    assert field.total_stride % model.size_multiple == 0  # an edge tile is padded as the whole image is
    plan = TilingPlan("exact", 90, 134, tile, field.aligned_halo_px, field.total_stride, field.aligned_halo_px)
    assert plan.grid[0] * plan.grid[1] > 1
    with torch.inference_mode():
        whole = model(torch.from_numpy(normalise(pixels))[None])[0].numpy()
    labels = np.zeros((90, 134), np.uint8)
    logits = np.zeros_like(whole)
    run_tiles(plan, array_source(pixels, normalise), ArraySink(labels, logits=logits), eager_runner(model, CPU),
              device=CPU)
    assert np.abs(logits - whole).max() <= 1e-4


@pytest.mark.parametrize("name", ["resnet_unet", "resnet_unet.onnx"])
def test_resnet_unet_reads_its_skip_size_as_a_scale(exported: dict[str, Path], name: str) -> None:
    """The decoder's `interpolate(size=skip.shape[-2:])` is read as the 2x it is at every size: stem 7x7/2
    (3 px before), max pool 3/2 (1 stem px = 2 px), two 3x3 convs at stride 4 (8 px), ... = 19 px before;
    the same from torch.export and from torch.onnx."""
    field = compute_receptive_field(load_model(exported[name]).model)
    assert field.before_px == (19, 19) and field.after_px == (16, 16)


def test_a_graph_captured_for_large_sizes_only_is_not_tiled_exactly(exported: dict[str, Path]) -> None:
    """shape_branch holds for widths >= 96 only (its branch on the width): small exact tiles would leave
    the captured sizes, so it has no exact field; fast tiles are padded up to its minimum and run."""
    loaded = load_model(exported["shape_branch"])
    with pytest.raises(ReceptiveFieldError, match="pads its input up to at least|holds only for"):
        compute_receptive_field(loaded.model)
    image = ImageData(np.random.default_rng(4).integers(0, 256, (200, 2000, 3), dtype=np.uint8))
    events: list[JobEvent] = []
    whole = estimate_tile_bytes(Segmenter(loaded, InferenceOptions(device="cpu")), 224, 2016, "labels")
    budget = whole // 2 + 4 * 200 * 2000  # half what the whole image needs, beside the image and labels
    result = Segmenter(loaded, InferenceOptions(device="cpu", tiling="fast", memory_budget=budget)).segment(
        image, on_event=events.append)
    plan = next(e for e in events if e.kind == "plan")
    assert plan.data["mode"] == "fast" and plan.data["grid"][0] * plan.data["grid"][1] > 1
    assert result.labels.shape == (200, 2000)


def test_a_small_budget_tiles_an_exported_model_exactly_through_the_segmenter(exported: dict[str, Path]) -> None:
    image = ImageData(np.random.default_rng(2).integers(0, 256, (300, 420, 3), dtype=np.uint8))
    loaded = load_model(exported["resnet_unet"])
    whole = Segmenter(loaded, InferenceOptions(device="cpu", tiling="off")).segment(image).labels
    events: list[JobEvent] = []
    tiled = Segmenter(loaded, InferenceOptions(device="cpu", memory_budget=5_000_000)).segment(
        image, on_event=events.append)
    plan = next(e for e in events if e.kind == "plan")
    assert plan.data["mode"] == "exact" and plan.data["grid"][0] * plan.data["grid"][1] > 1
    assert np.array_equal(tiled.labels, whole)


def test_a_model_with_global_context_gets_fast_tiles_when_the_whole_image_does_not_fit(
        exported: dict[str, Path]) -> None:
    image = ImageData(np.random.default_rng(2).integers(0, 256, (900, 1200, 3), dtype=np.uint8))
    loaded = load_model(exported["aspp"])  # an image-pooling branch: no bounded receptive field
    events: list[JobEvent] = []
    result = Segmenter(loaded, InferenceOptions(device="cpu", memory_budget=40_000_000)).segment(
        image, on_event=events.append)
    plan = next(e for e in events if e.kind == "plan")
    assert plan.data["mode"] == "fast" and plan.data["grid"][0] * plan.data["grid"][1] > 1
    assert plan.data["exact_halo_px"] is None and "receptive field unbounded" in plan.message
    assert plan.data["tile_bytes"] + plan.data["held_bytes"] <= 40_000_000
    assert plan.data["halo_px"] == FAST_HALO_STRIDES * 32
    assert result.labels.shape == (900, 1200)
    whole = Segmenter(loaded, InferenceOptions(device="cpu")).segment(image).labels  # fits the default budget
    assert (result.labels == whole).mean() > 0.5  # approximate, not garbage
    with pytest.raises(ValueError, match="--tiling exact is impossible"):
        Segmenter(loaded, InferenceOptions(device="cpu", tiling="exact", memory_budget=40_000_000)).segment(image)


def test_out_of_memory_on_the_whole_image_of_such_a_model_splits_it_into_fast_tiles(
        exported: dict[str, Path]) -> None:
    image = ImageData(np.random.default_rng(3).integers(0, 256, (90, 134, 3), dtype=np.uint8))
    segmenter = Segmenter(load_model(exported["aspp"]), InferenceOptions(device="cpu", engine="eager"))
    segmenter.fault_injection = FaultInjection(frozenset({0}), error=MemoryError)
    events: list[JobEvent] = []
    segmenter.segment(image, on_event=events.append)
    (warning,) = [e for e in events if e.kind == "warning"]
    assert warning.data["halo_px"] == FAST_HALO_STRIDES * 32  # not a halo of 0


def test_a_bgr_net_ending_in_a_softmax_keeps_its_field(exported: dict[str, Path]) -> None:
    """The wrapper's channel flip (BGR nets) and log of a softmax output are pointwise in space."""
    from leanseg.core.model.graph_model import GraphModel

    model = load_model(exported["resnet_unet"]).model
    wrapped = GraphModel(model.net, model.config, bgr=True, probabilities=True)
    assert compute_receptive_field(wrapped) == compute_receptive_field(model)
