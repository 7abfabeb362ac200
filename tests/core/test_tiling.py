"""Tiled inference equals whole-image inference; tiles report progress and stop on cancel."""
from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from leanseg.core.engine.receptive_field import compute_receptive_field
from leanseg.core.engine.tile_plan import TilingPlan, choose_tiling
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
    plan = TilingPlan("exact", 90, 134, (16, 16), field.aligned_halo_px, field.total_stride, field.aligned_halo_px)
    assert plan.grid == (6, 9)
    labels, logits = tiled(small_unet, pixels, plan)
    whole = whole_logits(small_unet, pixels)
    assert np.abs(logits - whole).max() <= 1e-4
    top_two = np.sort(whole, axis=0)[-2:]
    decided = top_two[1] - top_two[0] > 1e-4
    assert np.array_equal(labels[decided], whole.argmax(0)[decided])


def test_a_halo_short_of_the_field_is_not_exact(small_unet: torch.nn.Module, pixels: np.ndarray) -> None:
    field = compute_receptive_field(small_unet)
    plan = TilingPlan("fast", 90, 134, (16, 16), 4, field.total_stride, field.aligned_halo_px)
    _, logits = tiled(small_unet, pixels, plan)
    assert np.abs(logits - whole_logits(small_unet, pixels)).max() > 1e-4


def test_cores_cover_the_image_once_and_tiles_start_on_the_stride() -> None:
    plan = TilingPlan("exact", 1000, 700, (256, 320), 64, 32, 320)
    cover = np.zeros((1000, 700), np.int32)
    for tile in plan.tiles():
        top, bottom, left, right = tile.core
        cover[top:bottom, left:right] += 1
        assert tile.read[0] % 32 == 0 and tile.read[2] % 32 == 0
        assert tile.read[0] == max(0, top - 64) and tile.read[1] == min(1000, bottom + 64)
    assert (cover == 1).all()


def pixels_read(plan: TilingPlan) -> int:
    return sum((tile.read[1] - tile.read[0]) * (tile.read[3] - tile.read[2]) for tile in plan.tiles())


def max_read_bytes(plan: TilingPlan, tile_bytes: Callable[[int, int], int]) -> int:
    def padded(pixels: int) -> int:
        return -(-pixels // plan.stride) * plan.stride
    return max(tile_bytes(padded(t.read[1] - t.read[0]), padded(t.read[3] - t.read[2])) for t in plan.tiles())


def test_choose_tiling_from_the_budget() -> None:
    per_pixel = 100

    def tile_bytes(height: int, width: int) -> int:
        return per_pixel * height * width

    whole = choose_tiling(1024, 1024, mode="auto", budget_bytes=200 * 2**20, tile_bytes=tile_bytes, stride=32,
                          exact_halo_px=320)
    assert whole.mode == "whole" and whole.grid == (1, 1)
    tight = choose_tiling(4096, 3000, mode="auto", budget_bytes=100 * 1200 * 1200, tile_bytes=tile_bytes,
                          stride=32, exact_halo_px=320)
    assert tight.mode == "exact" and tight.halo_px == 320 and all(side % 32 == 0 for side in tight.tile_shape)
    assert max_read_bytes(tight, tile_bytes) <= 100 * 1200 * 1200
    fast = choose_tiling(4096, 3000, mode="fast", budget_bytes=100 * 1200 * 1200, tile_bytes=tile_bytes,
                         stride=32, exact_halo_px=320)
    assert fast.mode == "fast" and fast.halo_px == 192 and pixels_read(fast) < pixels_read(tight)
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
    assert pixels_read(sharing) > pixels_read(alone) and max_read_bytes(alone, tile_bytes) + held > budget
    assert sharing.tile_bytes is not None and sharing.tile_bytes + held <= budget
    assert max_read_bytes(sharing, tile_bytes) == sharing.tile_bytes
    assert "of image and outputs within budget" in sharing.describe()
    whole = choose_tiling(1024, 1024, mode="auto", budget_bytes=100 * 1100 * 1100, tile_bytes=tile_bytes, stride=32,
                          exact_halo_px=320, held_bytes=100 * 1100 * 1100 - 100 * 1024 * 1024 + 1)
    assert whole.mode == "exact"  # the whole image alone would fit, not beside what the job holds


def test_strips_where_they_fit_read_the_fewest_pixels() -> None:
    def tile_bytes(height: int, width: int) -> int:
        return 50 * height * width

    # a strip of 2048 x (1024 + 192) fits, the whole image does not: two strips, one halo each
    plan = choose_tiling(2048, 2048, mode="fast", budget_bytes=50 * 2048 * 1300, tile_bytes=tile_bytes, stride=32,
                         exact_halo_px=320)
    assert plan.grid == (2, 1)  # full-width rows: a memory-mapped image is read in contiguous runs
    assert pixels_read(plan) == 2048 * (2048 + 2 * 192)  # not the 4 x 1216^2 of 2x2 square tiles
    assert "2 rows x 1 column of tiles 2048x1024 px (width x height) + halo 192 px" in plan.describe()


@pytest.mark.parametrize("height,width,budget_px,held_px", [
    (2048, 2048, 1300 * 2048, 0), (4096, 4096, 5_000_000, 1_000_000), (1000, 3000, 700 * 900, 0),
    (5000, 700, 400 * 700, 50_000), (777, 1333, 300 * 300, 0),
])
def test_the_plan_is_the_cheapest_grid_that_fits(height: int, width: int, budget_px: int, held_px: int) -> None:
    def tile_bytes(rows: int, cols: int) -> int:
        return 40 * rows * cols + 5 * max(rows, cols) ** 2  # not a function of the pixel count alone

    def aligned(pixels: int) -> int:
        return -(-pixels // 32) * 32

    budget, held = 45 * budget_px, 45 * held_px
    plan = choose_tiling(height, width, mode="exact", budget_bytes=budget, tile_bytes=tile_bytes, stride=32,
                         exact_halo_px=96, held_bytes=held)
    assert max_read_bytes(plan, tile_bytes) + held <= budget
    def reads(length: int, core: int) -> list[int]:  # the sides a grid's tiles read along one axis, halo 96
        return [min(start + core + 96, length) - max(start - 96, 0) for start in range(0, length, core)]

    cheapest = None  # by brute force over every grid of stride-aligned cores of at least 64 px
    for rows in range(1, height // 64 + 1):
        row_reads = reads(height, aligned(-(-height // rows)))
        for cols in range(1, width // 64 + 1):
            col_reads = reads(width, aligned(-(-width // cols)))  # a tile reads one row band x one column band
            largest = max(tile_bytes(aligned(r), aligned(c)) for r in set(row_reads) for c in set(col_reads))
            if largest + held <= budget:
                cost = sum(row_reads) * sum(col_reads)
                cheapest = cost if cheapest is None else min(cheapest, cost)
    assert cheapest is not None and pixels_read(plan) == cheapest


# --- through the Segmenter, the job and the events ------------------------------------------

@pytest.mark.parametrize(("engine", "budget"), [("eager", 1_200_000), ("lean", 600_000)])  # eager holds more
def test_segmenter_tiles_under_a_small_budget_and_reports_each_tile(unet_checkpoint: Path, pixels: np.ndarray,
                                                                     engine: str, budget: int) -> None:
    image = ImageData(pixels)
    reference = cpu_segmenter(unet_checkpoint, tiling="off", engine="eager").segment(image).labels
    events: list[JobEvent] = []
    tiled_segmenter = cpu_segmenter(unet_checkpoint, memory_budget=budget, engine=engine)
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
