"""Mirror averaging (`--mirror flip`): the mean of a tile's logits and its mirror image's, on a canvas padded to
the tiling stride so exact tiles stay exact; the CLI's default for still images, recorded by batch runs."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from leanseg.core.engine.mirror import cropped_sink, mirror_runner, padded_source
from leanseg.core.engine.tile_plan import BudgetTooSmallError
from leanseg.core.engine.tiling import ArraySink
from leanseg.core.io.images import ImageData
from leanseg.core.segment_tiled import estimate_tile_bytes, plan_tiles

from .tiling_samples import cpu_segmenter

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _pixels(height: int, width: int) -> np.ndarray:
    """A left-right asymmetric picture: a gradient, a bright block near the left edge, noise."""
    rng = np.random.default_rng(1)
    pixels = rng.integers(0, 60, (height, width, 3), dtype=np.uint8)
    pixels += np.linspace(0, 120, width, dtype=np.uint8)[None, :, None]
    pixels[height // 4: height // 2, 3: width // 5] = 250
    return pixels


def test_mirror_runner_averages_a_tile_with_its_mirror_image(small_unet: torch.nn.Module) -> None:
    x = torch.from_numpy(_pixels(40, 52)).permute(2, 0, 1)[None].float().div(255)
    with torch.inference_mode():
        plain, mirrored = small_unet(x), small_unet(x.flip(-1)).flip(-1)
    assert (plain - mirrored).abs().max() > 1e-3  # the net is not symmetric: averaging changes something

    def run(tile: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            return small_unet(tile)

    logits = mirror_runner(run, "logits")(x)
    torch.testing.assert_close(logits, (plain + mirrored) / 2, rtol=0, atol=1e-6)
    labels = mirror_runner(run, "labels")(x)
    assert labels.shape == (1, 40, 52) and torch.equal(labels.long(), logits.argmax(1))
    with pytest.raises(ValueError, match="unknown output"):
        mirror_runner(run, "probs")


def test_the_canvas_reads_zeros_right_of_the_image_and_writes_none_there() -> None:
    image = torch.arange(2 * 3 * 5, dtype=torch.float32).reshape(1, 2, 3, 5) + 1

    def source(box: tuple[int, int, int, int]) -> torch.Tensor:
        top, bottom, left, right = box
        assert right <= 5, "the image's own source is never asked for canvas columns"
        return image[..., top:bottom, left:right]

    tile = padded_source(source, 5)((0, 3, 2, 8))
    assert tile.shape == (1, 2, 3, 6)
    torch.testing.assert_close(tile[..., :3], image[..., 2:5])
    assert not tile[..., 3:].any()
    labels = np.zeros((3, 5), np.uint8)
    sink = cropped_sink(ArraySink(labels), 5)
    sink((0, 3, 4, 8), torch.full((3, 4), 7, dtype=torch.uint8))
    sink((0, 3, 6, 8), torch.full((3, 2), 9, dtype=torch.uint8))  # wholly in the padding: dropped
    assert labels[:, 4].tolist() == [7, 7, 7] and not labels[:, :4].any()


@pytest.mark.parametrize("engine", ["lean", "eager"])
def test_exact_tiles_stay_exact_with_mirror_averaging(unet_checkpoint: Path, engine: str) -> None:
    """A width that is not a multiple of the stride (4): the mirrored pass of every tile still equals that pass
    over the whole image, so the tiled result is the whole image's."""
    pixels = ImageData(_pixels(150, 203))
    whole = cpu_segmenter(unet_checkpoint, engine=engine, tiling="off", mirror="flip", want_probs=True)
    tiled = cpu_segmenter(unet_checkpoint, engine=engine, tiling="exact", mirror="flip", want_probs=True,
                          memory_budget=3_000_000)
    reference, result = whole.segment(pixels), tiled.segment(pixels)
    assert "tiling exact" in result.notes[0] and "one tile" not in result.notes[0], result.notes[0]
    assert reference.probs is not None and result.probs is not None
    np.testing.assert_allclose(result.probs, reference.probs, rtol=0, atol=1e-5)
    plain = cpu_segmenter(unet_checkpoint, engine=engine, tiling="off", want_probs=True).segment(pixels)
    assert plain.probs is not None and np.abs(plain.probs - reference.probs).max() > 1e-3


def test_mirror_averaging_is_mirror_symmetric(unet_checkpoint: Path) -> None:
    """Segmenting the mirror image gives the mirrored result (width a multiple of the stride)."""
    pixels = _pixels(96, 200)
    segmenter = cpu_segmenter(unet_checkpoint, engine="lean", mirror="flip", want_probs=True)
    direct = segmenter.segment(ImageData(pixels)).probs
    mirrored = segmenter.segment(ImageData(np.ascontiguousarray(pixels[:, ::-1]))).probs
    assert direct is not None and mirrored is not None
    np.testing.assert_allclose(direct, mirrored[:, :, ::-1], rtol=0, atol=1e-5)


def test_the_budget_counts_the_second_pass(unet_checkpoint: Path) -> None:
    off = cpu_segmenter(unet_checkpoint, engine="lean", memory_budget=4_000_000)
    flip = cpu_segmenter(unet_checkpoint, engine="lean", memory_budget=4_000_000, mirror="flip")
    assert estimate_tile_bytes(flip, 256, 256, "labels") > estimate_tile_bytes(off, 256, 256, "logits")
    plan_off, plan_flip = plan_tiles(off, 600, 800, "labels"), plan_tiles(flip, 600, 800, "labels")
    assert plan_flip.tile_bytes is not None and plan_flip.tile_bytes + plan_flip.held_bytes <= 4_000_000
    assert np.prod(plan_flip.grid) > np.prod(plan_off.grid), (plan_off.describe(), plan_flip.describe())


def test_messages_name_the_image_not_the_padded_canvas(unet_checkpoint: Path) -> None:
    image = ImageData(_pixels(150, 203))  # the canvas is 204 wide (stride 4)
    roomy = cpu_segmenter(unet_checkpoint, engine="lean", mirror="flip", tiling="off")
    assert roomy.segment(image).notes[0].startswith("whole image 203x150")
    tight = cpu_segmenter(unet_checkpoint, engine="lean", mirror="flip", memory_budget=200_000)
    with pytest.raises(BudgetTooSmallError, match="cannot hold a 203x150 image"):
        tight.segment(image)


def _leanseg(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "leanseg.core", *args], capture_output=True, text=True, timeout=300)


def test_segment_averages_by_default_and_mirror_off_turns_it_off(tmp_path: Path) -> None:
    """The shipped model on a sample frame: the default and --mirror off differ, on a small share of pixels."""
    image = Path(__file__).parents[2] / "assets" / "samples" / "camvid_0016E5_07959.png"
    outputs = {}
    for mode in ("default", "off"):
        out = tmp_path / mode
        flags = [] if mode == "default" else ["--mirror", "off"]
        result = _leanseg("segment", str(image), "--out", str(out), "--threads", "1", *flags)
        assert result.returncode == 0, result.stderr
        assert ("mirror averaging" in result.stdout + result.stderr) == (mode == "default")
        outputs[mode] = cv2.imread(str(out / f"{image.stem}_labels.png"), cv2.IMREAD_UNCHANGED)
    assert outputs["default"].shape == (360, 480)
    assert 0 < (outputs["default"] != outputs["off"]).mean() < 0.1


def batch_command(tmp_path: Path, checkpoint: Path) -> tuple[list[str], Path]:
    """`leanseg batch` arguments over two small images in tmp_path/in, and its output folder tmp_path/out."""
    inputs, out = tmp_path / "in", tmp_path / "out"
    inputs.mkdir()
    for name in ("a", "b"):
        cv2.imwrite(str(inputs / f"{name}.png"), _pixels(40, 48))
    return ["batch", str(inputs), "--out", str(out), "--model", str(checkpoint), "--threads", "1"], out


def test_a_batch_resumed_with_another_mirror_mode_is_refused(tmp_path: Path, unet_checkpoint: Path) -> None:
    common, out = batch_command(tmp_path, unet_checkpoint)
    assert _leanseg(*common).returncode == 0
    labels = (out / "a_labels.png").read_bytes()
    refused = _leanseg(*common, "--mirror", "off")
    assert refused.returncode == 2 and "--overwrite" in refused.stderr
    assert "made with mirror flip, not mirror off" in refused.stderr and "sha256" not in refused.stderr  # what differs
    assert (out / "a_labels.png").read_bytes() == labels  # nothing redone or lost
    assert _leanseg(*common).returncode == 0  # the same mode resumes
