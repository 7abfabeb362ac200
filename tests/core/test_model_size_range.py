"""A `.pt2` exported for a bounded size range (torch.export's Dim max): it says the range when it loads, a larger
image is refused naming the file and the export's max, and tiles planned within the range segment it exactly."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from torch import Tensor, nn
from torch.export import Dim

from leanseg.core import segment_tiled
from leanseg.core.engine import compile
from leanseg.core.engine.frontends.ir import OutsideCapturedSizes
from leanseg.core.engine.tile_plan import choose_tiling, reads_within
from leanseg.core.engine.tiling import ArraySink, array_source, run_tiles
from leanseg.core.io.images import ImageData, to_model_input
from leanseg.core.model.sources import describe, load_model
from leanseg.core.predict import InferenceOptions, Segmenter

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class HalfThenUp(nn.Module):
    """(1, 3, H, W) -> (1, 4, H, W): a stride-2 conv, a 1x1 head, logits resized to the input's size."""

    def __init__(self) -> None:
        super().__init__()
        self.down = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.head = nn.Conv2d(8, 4, 1)

    def forward(self, x: Tensor) -> Tensor:
        return F.interpolate(self.head(self.down(x)), size=x.shape[-2:], mode="bilinear")


@pytest.fixture(scope="module")
def bounded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, nn.Module]:
    """bounded.pt2: heights 4..64 and widths 4..96, multiples of 4 (Dim max 16 and 24, times 4)."""
    torch.manual_seed(0)
    model = HalfThenUp().eval()
    height, width = Dim("h", min=1, max=16), Dim("w", min=1, max=24)
    program = torch.export.export(model, (torch.rand(1, 3, 32, 48),),
                                  dynamic_shapes={"x": {2: 4 * height, 3: 4 * width}})
    path = tmp_path_factory.mktemp("bounded") / "bounded.pt2"
    torch.export.save(program, str(path))
    return path, model


def test_the_range_is_said_when_it_loads(bounded: tuple[Path, nn.Module]) -> None:
    loaded = load_model(bounded[0])
    assert loaded.model.max_size == (64, 96) and loaded.info.config.max_size == (64, 96)
    assert "at most 96x64 px (width x height) a pass (its export's range)" in describe(loaded)


def test_a_larger_image_is_refused_naming_the_file_and_the_export_max(bounded: tuple[Path, nn.Module]) -> None:
    plan = compile(load_model(bounded[0]).model, device="cpu")
    with pytest.raises(OutsideCapturedSizes, match=r"^bounded\.pt2 was exported for heights 4\.\.64 and widths "
                                                   r"4\.\.96 px, not height 100 and width 92 \(the range torch\.export "
                                                   r"recorded: the Dim min/max .*export it again with a larger max$"):
        plan.run(torch.rand(1, 3, 100, 92))


def test_tiles_within_the_range_segment_a_larger_image_exactly(bounded: tuple[Path, nn.Module]) -> None:
    """segment_tiled.plan_tiles passes the model's max_size on: every tile read fits the range."""
    path, model = bounded
    loaded = load_model(path)
    segmenter = Segmenter(loaded, InferenceOptions(device="cpu", mirror="off"))
    pixels = np.random.default_rng(0).integers(0, 256, (150, 211, 3), dtype=np.uint8)
    plan = segment_tiled.plan_tiles(segmenter, 150, 211, "labels")
    assert plan.mode == "exact" and "the model takes at most 96x64 px a pass, the range it was exported for: " \
        "export it with a larger max to run this image whole" in plan.describe()
    inside = segment_tiled.plan_tiles(segmenter, 60, 90, "labels")  # fits: the plan says nothing of the range
    assert inside.mode == "whole" and "range" not in inside.describe()
    assert all(t.read[1] - t.read[0] <= 64 and t.read[3] - t.read[2] <= 96 for t in plan.tiles())
    labels = np.zeros((150, 211), np.uint8)
    source = array_source(pixels, lambda p: to_model_input(ImageData(p), 3, loaded.info.mean, loaded.info.std))
    run_tiles(plan, source, ArraySink(labels), segment_tiled.runner_for(segmenter, "labels"),
              device=torch.device("cpu"))
    x = torch.from_numpy(to_model_input(ImageData(pixels), 3, loaded.info.mean, loaded.info.std))[None]
    with torch.inference_mode():  # the whole image at once, padded to the multiple (4) as the model pads it
        expected = model(F.pad(x, (0, 1, 0, 2))).argmax(1)[0, :150, :211].numpy()
    assert (labels == expected).mean() > 0.999


def no_larger_than(limit: tuple[int, int]):  # type: ignore[no-untyped-def]
    def tile_bytes(rows: int, cols: int) -> int:
        assert rows <= limit[0] and cols <= limit[1], (rows, cols)  # never estimated: the model cannot run it
        return rows * cols

    return tile_bytes


def test_choose_tiling_keeps_reads_within_the_model_range() -> None:
    limit = (128, 256)
    whole = choose_tiling(100, 200, mode="auto", budget_bytes=10**9, tile_bytes=no_larger_than(limit), stride=32,
                          exact_halo_px=32, max_read_px=limit)
    assert whole.mode == "whole"
    tiled = choose_tiling(1000, 1000, mode="auto", budget_bytes=10**9, tile_bytes=no_larger_than(limit), stride=32,
                          exact_halo_px=32, max_read_px=limit)
    assert tiled.mode == "exact" and tiled.halo_px == 32
    assert all(t.read[1] - t.read[0] <= 128 and t.read[3] - t.read[2] <= 256 for t in tiled.tiles())
    # an exact halo too wide for the range: auto takes fast tiles with the halo that fits, exact refuses
    fast = choose_tiling(1000, 1000, mode="auto", budget_bytes=10**9, tile_bytes=no_larger_than(limit), stride=32,
                         exact_halo_px=96, max_read_px=limit)
    assert fast.mode == "fast" and fast.halo_px == 32
    assert all(t.read[1] - t.read[0] <= 128 for t in fast.tiles())
    with pytest.raises(ValueError, match=r"takes at most 256x128 px a pass, less than its smallest exact tile"):
        choose_tiling(1000, 1000, mode="exact", budget_bytes=10**9, tile_bytes=no_larger_than(limit), stride=32,
                      exact_halo_px=96, max_read_px=limit)
    with pytest.raises(ValueError, match=r"tiling off runs the whole 1000x1000 image in one pass, but the model "
                                         r"takes at most 256x128 px"):
        choose_tiling(1000, 1000, mode="off", budget_bytes=10**9, tile_bytes=no_larger_than(limit), stride=32,
                      exact_halo_px=32, max_read_px=limit)


@given(st.integers(1, 64), st.integers(1, 64), st.integers(0, 8), st.sampled_from([1, 8, 16, 32]),
       st.integers(0, 40), st.integers(0, 40))
def test_tiles_split_after_running_out_of_memory_stay_within_the_range(
        core_rows: int, core_cols: int, halo: int, stride: int, limit_rows: int, limit_cols: int) -> None:
    """`reads_within` (used when a tile is split again after an out-of-memory error): whatever the tile, halo and
    range, a shrunk tile reads no more than the range (0: that side is unbounded), shrinks the core before the
    halo, stays on the stride grid, and is untouched when it fits already."""
    tile, halo_px = (core_rows * stride, core_cols * stride), halo * stride
    limit = (limit_rows and max(stride, limit_rows * 8), limit_cols and max(stride, limit_cols * 8))
    (rows, cols), new_halo = reads_within(tile, halo_px, stride, limit)
    assert rows % stride == 0 and cols % stride == 0 and new_halo % stride == 0
    assert stride <= rows <= tile[0] and stride <= cols <= tile[1] and 0 <= new_halo <= halo_px
    for side, bound in ((rows, limit[0]), (cols, limit[1])):
        assert not bound or side + 2 * new_halo <= bound, (side, new_halo, bound)
    fits = all(not bound or side + 2 * halo_px <= bound for side, bound in zip(tile, limit))
    if fits:
        assert ((rows, cols), new_halo) == (tile, halo_px)
    if new_halo < halo_px:  # the halo gave way only where the smallest core with it did not fit
        assert any(bound and stride + 2 * halo_px > bound for bound in limit)
    assert reads_within(tile, halo_px, stride, None) == (tile, halo_px)


def test_segment_tiles_a_larger_image_within_the_range(bounded: tuple[Path, nn.Module], tmp_path: Path) -> None:
    """The CLI end to end: the range in the model's line (once, not a note on every run), tiles within it with the
    way to run the image whole, and labels written for the whole image."""
    image = tmp_path / "big.png"
    cv2.imwrite(str(image), np.random.default_rng(1).integers(0, 256, (150, 211, 3), dtype=np.uint8))
    done = subprocess.run([sys.executable, "-m", "leanseg.core", "segment", str(image), "--model", str(bounded[0]),
                           "--out", str(tmp_path / "out"), "--threads", "1", "--device", "cpu"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "at most 96x64 px (width x height) a pass (its export's range)" in done.stdout.splitlines()[0]
    assert not any("range" in line for line in done.stdout.splitlines() if line.startswith("note:"))
    assert "the model takes at most 96x64 px a pass, the range it was exported for" in done.stdout
    labels = cv2.imread(str(tmp_path / "out" / "big_labels.png"), cv2.IMREAD_UNCHANGED)
    assert labels.shape == (150, 211) and labels.max() < 4
