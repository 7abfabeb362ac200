"""Tiled inference equals whole-image inference; tiles report progress and stop on cancel."""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from leanseg.core.engine.receptive_field import compute_receptive_field
from leanseg.core.engine.tile_plan import TilingPlan, choose_tiling, eager_peak_estimator
from leanseg.core.engine.tiling import ArraySink, array_source, eager_runner, run_tiles
from leanseg.core.events import JobCancelled, JobEvent
from leanseg.core.io.images import ImageData
from leanseg.core.jobs import segment_files

from .tiling_samples import cpu_segmenter

pytestmark = pytest.mark.usefixtures("one_torch_thread")
CPU = torch.device("cpu")


def normalise(pixels: np.ndarray) -> np.ndarray:
    return (np.moveaxis(pixels, -1, 0).astype(np.float32) / 255.0 - 0.5) / 0.25


def whole_logits(model: torch.nn.Module, pixels: np.ndarray) -> np.ndarray:
    with torch.inference_mode():
        return model(torch.from_numpy(normalise(pixels))[None])[0].numpy()


def tiled(model: torch.nn.Module, pixels: np.ndarray, plan: TilingPlan) -> tuple[np.ndarray, np.ndarray]:
    height, width = pixels.shape[:2]
    labels = np.zeros((height, width), np.uint8)
    logits = np.zeros((4, height, width), np.float32)
    run_tiles(plan, array_source(pixels, normalise), ArraySink(labels, logits=logits), eager_runner(model, CPU),
              device=CPU)
    return labels, logits


@pytest.fixture
def pixels() -> np.ndarray:
    return np.random.default_rng(1).integers(0, 256, (90, 134, 3), dtype=np.uint8)  # not multiples of the stride


def test_exact_tiles_reproduce_whole_image(small_unet: torch.nn.Module, pixels: np.ndarray) -> None:
    field = compute_receptive_field(small_unet)
    plan = TilingPlan("exact", 90, 134, 16, field.aligned_halo_px, field.total_stride, field.aligned_halo_px)
    assert plan.grid == (6, 9)
    labels, logits = tiled(small_unet, pixels, plan)
    whole = whole_logits(small_unet, pixels)
    assert np.abs(logits - whole).max() <= 1e-4
    top_two = np.sort(whole, axis=0)[-2:]
    decided = top_two[1] - top_two[0] > 1e-4
    assert np.array_equal(labels[decided], whole.argmax(0)[decided])


def test_a_halo_short_of_the_field_is_not_exact(small_unet: torch.nn.Module, pixels: np.ndarray) -> None:
    field = compute_receptive_field(small_unet)
    plan = TilingPlan("fast", 90, 134, 16, 4, field.total_stride, field.aligned_halo_px)
    _, logits = tiled(small_unet, pixels, plan)
    assert np.abs(logits - whole_logits(small_unet, pixels)).max() > 1e-4


def test_cores_cover_the_image_once_and_tiles_start_on_the_stride() -> None:
    plan = TilingPlan("exact", 1000, 700, 256, 64, 32, 320)
    cover = np.zeros((1000, 700), np.int32)
    for tile in plan.tiles():
        top, bottom, left, right = tile.core
        cover[top:bottom, left:right] += 1
        assert tile.read[0] % 32 == 0 and tile.read[2] % 32 == 0
        assert tile.read[0] == max(0, top - 64) and tile.read[1] == min(1000, bottom + 64)
    assert (cover == 1).all()


def test_choose_tiling_from_the_budget() -> None:
    per_pixel = 100

    def tile_bytes(height: int, width: int) -> int:
        return per_pixel * height * width

    whole = choose_tiling(1024, 1024, mode="auto", budget_bytes=200 * 2**20, tile_bytes=tile_bytes, stride=32,
                          exact_halo_px=320)
    assert whole.mode == "whole" and whole.grid == (1, 1)
    tight = choose_tiling(4096, 3000, mode="auto", budget_bytes=100 * 1200 * 1200, tile_bytes=tile_bytes,
                          stride=32, exact_halo_px=320)
    assert tight.mode == "exact" and tight.halo_px == 320 and tight.tile_px % 32 == 0
    assert tile_bytes(tight.tile_px + 640, tight.tile_px + 640) <= 100 * 1200 * 1200
    fast = choose_tiling(4096, 3000, mode="fast", budget_bytes=100 * 1200 * 1200, tile_bytes=tile_bytes,
                         stride=32, exact_halo_px=320)
    assert fast.mode == "fast" and fast.halo_px == 192 and fast.tile_px > tight.tile_px
    assert "tiling fast" in fast.describe() and "halo 192 px" in fast.describe()


def test_the_budget_covers_the_image_and_its_outputs() -> None:
    def tile_bytes(height: int, width: int) -> int:
        return 100 * height * width

    budget = 100 * 1500 * 1500
    alone = choose_tiling(4096, 4096, mode="exact", budget_bytes=budget, tile_bytes=tile_bytes, stride=32,
                          exact_halo_px=320)
    held = budget // 3
    sharing = choose_tiling(4096, 4096, mode="exact", budget_bytes=budget, tile_bytes=tile_bytes, stride=32,
                            exact_halo_px=320, held_bytes=held)
    assert sharing.tile_px < alone.tile_px
    assert sharing.tile_bytes is not None and sharing.tile_bytes + held <= budget
    # the largest tile that fits, not a smaller even split: one more stride would not fit
    assert tile_bytes(sharing.tile_px + 32 + 640, sharing.tile_px + 32 + 640) + held > budget
    assert "of image and outputs within budget" in sharing.describe()
    whole = choose_tiling(1024, 1024, mode="auto", budget_bytes=100 * 1100 * 1100, tile_bytes=tile_bytes, stride=32,
                          exact_halo_px=320, held_bytes=100 * 1100 * 1100 - 100 * 1024 * 1024 + 1)
    assert whole.mode == "exact"  # the whole image alone would fit, not beside what the job holds


def test_eager_estimate_grows_with_pixels(small_unet: torch.nn.Module) -> None:
    estimate = eager_peak_estimator(small_unet, 3)
    small, large = estimate((1, 3, 256, 256)), estimate((1, 3, 512, 512))
    assert small > 256 * 256 * 4 * 4  # at least the first feature map
    assert large == pytest.approx(4 * small, rel=0.01)


# --- through the Segmenter, the job and the events ------------------------------------------

@pytest.mark.parametrize("engine", ["eager", "lean"])
def test_segmenter_tiles_under_a_small_budget_and_reports_each_tile(unet_checkpoint: Path, pixels: np.ndarray,
                                                                     engine: str) -> None:
    image = ImageData(pixels)
    reference = cpu_segmenter(unet_checkpoint, tiling="off", engine="eager").segment(image).labels
    events: list[JobEvent] = []
    tiled_segmenter = cpu_segmenter(unet_checkpoint, memory_budget=600_000, engine=engine)
    result = tiled_segmenter.segment(image, on_event=events.append)
    plans = [e for e in events if e.kind == "plan"]
    tiles = [e for e in events if e.kind == "tile"]
    assert len(plans) == 1 and plans[0].data["mode"] == "exact" and plans[0].data["halo_px"] == 28
    assert plans[0].count == len(tiles) > 1
    assert [e.index for e in tiles] == list(range(len(tiles))) and all(e.count == len(tiles) for e in tiles)
    assert all(e.live_bytes for e in tiles)
    assert "tiling exact" in result.notes[0]
    assert np.array_equal(result.labels, reference)


def test_cancel_between_tiles_writes_nothing(unet_checkpoint: Path, tmp_path: Path) -> None:
    import cv2

    source = tmp_path / "big.png"
    cv2.imwrite(str(source), np.random.default_rng(2).integers(0, 256, (120, 160, 3), dtype=np.uint8))
    cancel = threading.Event()
    seen: list[JobEvent] = []

    def on_event(event: JobEvent) -> None:
        seen.append(event)
        if event.kind == "tile" and event.index == 1:
            cancel.set()

    out = tmp_path / "out"
    summary = segment_files([source], out, cpu_segmenter(unet_checkpoint, memory_budget=1_000_000),
                            cancel=cancel, on_event=on_event)
    assert summary.cancelled
    assert [e.index for e in seen if e.kind == "tile"] == [0, 1]
    assert not out.exists() or not any(out.iterdir())


def test_cancel_set_before_the_first_tile(unet_checkpoint: Path, pixels: np.ndarray) -> None:
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(JobCancelled):
        cpu_segmenter(unet_checkpoint, tiling="exact").segment(ImageData(pixels), cancel=cancel)
