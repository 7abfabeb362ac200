"""Multi-scale averaging (`--scales 0.75 1 1.25`): the mean of a tile's class probabilities at several sizes,
each resized back; tiles, when needed, are fast ones with the halo widened for the smallest scale."""
from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from leanseg.core.assets import default_model_path
from leanseg.core.engine.mirror import mirror_runner
from leanseg.core.engine.multiscale import multiscale_runner
from leanseg.core.engine.oom import FaultInjection
from leanseg.core.engine.tile_plan import FAST_HALO_STRIDES
from leanseg.core.events import JobEvent
from leanseg.core.io.images import ImageData, read_image, to_model_input
from leanseg.core.model.checkpoint import load_checkpoint
from leanseg.core.predict import InferenceOptions, Segmenter
from leanseg.core.segment_tiled import estimate_tile_bytes, plan_tiles

from .test_mirror import _leanseg, _pixels, batch_command
from .tiling_samples import cpu_segmenter

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _run(model: torch.nn.Module):  # type: ignore[no-untyped-def]
    def run(tile: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            return model(tile)

    return run


def test_the_runner_averages_the_probabilities_of_each_size_resized_back(small_unet: torch.nn.Module) -> None:
    x = torch.from_numpy(_pixels(40, 52)).permute(2, 0, 1)[None].float().div(255)
    expected = torch.zeros(1, 0)
    with torch.inference_mode():
        for scale, size in ((0.5, (20, 26)), (1.0, (40, 52)), (1.5, (60, 78))):
            scaled = F.interpolate(x, size=size, mode="bilinear", align_corners=False) if scale != 1 else x
            probs = F.interpolate(small_unet(scaled), size=(40, 52), mode="bilinear", align_corners=False).softmax(1)
            expected = probs if expected.numel() == 0 else expected + probs
        expected /= 3
        plain = small_unet(x).softmax(1)
    assert (expected - plain).abs().max() > 1e-4  # the other sizes change something (far above the 1e-6 below)
    logits = multiscale_runner(_run(small_unet), (1.5, 0.5, 1.0), "logits")(x)  # any order: sorted
    torch.testing.assert_close(logits.softmax(1), expected, rtol=0, atol=1e-6)
    labels = multiscale_runner(_run(small_unet), (0.5, 1.0, 1.5), "labels")(x)
    assert labels.shape == (1, 40, 52) and torch.equal(labels.long(), expected.argmax(1))


def test_one_scale_of_one_is_the_plain_run(small_unet: torch.nn.Module) -> None:
    x = torch.from_numpy(_pixels(36, 44)).permute(2, 0, 1)[None].float().div(255)
    logits = multiscale_runner(_run(small_unet), (1.0,), "logits")(x)
    with torch.inference_mode():
        torch.testing.assert_close(logits.softmax(1), small_unet(x).softmax(1), rtol=0, atol=1e-6)


@pytest.mark.parametrize(("scales", "wording"), [
    ((), "at least one size"), ((0.1, 1.0), r"numbers in 0.25..4"), ((1.0, 1.0), "differ from each other"),
    ((True,), "numbers in"), (tuple(0.5 + 0.1 * i for i in range(9)), "at most 8"),
])
def test_bad_scales_are_named(scales: tuple[float, ...], wording: str) -> None:
    with pytest.raises(ValueError, match=wording):
        InferenceOptions(scales=scales)


def test_exact_tiles_are_refused_and_auto_tiles_are_fast_with_a_wider_halo(unet_checkpoint: Path) -> None:
    with pytest.raises(ValueError, match="--tiling exact is impossible with --scales"):
        InferenceOptions(scales=(0.5, 1.0), tiling="exact")
    plain = cpu_segmenter(unet_checkpoint, engine="lean", memory_budget=3_000_000)
    scaled = cpu_segmenter(unet_checkpoint, engine="lean", memory_budget=3_000_000, scales=(0.5, 1.0))
    plan = plan_tiles(scaled, 300, 400, "labels")
    stride = plan.stride
    assert plan.mode == "fast" and plan.halo_px == 2 * FAST_HALO_STRIDES * stride, plan.describe()
    assert plan_tiles(plain, 300, 400, "labels").mode == "exact"
    assert estimate_tile_bytes(scaled, 128, 128, "labels") > estimate_tile_bytes(plain, 128, 128, "logits")


def test_tiles_of_a_multiscale_image_agree_with_the_whole_on_the_shipped_model() -> None:
    """Fast tiles (a resized tile's pixels are not the resized image's, so no tile is exact): on a CamVid frame
    at twice its size, cut into tiles by a budget, the labels still agree with the whole frame's almost everywhere."""
    frame = read_image(Path(__file__).parents[2] / "assets" / "samples" / "camvid_0016E5_07959.png").pixels
    frame = ImageData(cv2.resize(frame, (960, 720), interpolation=cv2.INTER_LINEAR))
    loaded = load_checkpoint(default_model_path())
    scales = (0.75, 1.0, 1.25)
    whole = Segmenter(loaded, InferenceOptions(device="cpu", scales=scales, tiling="off")).segment(frame)
    tiled = Segmenter(loaded, InferenceOptions(device="cpu", scales=scales, tiling="fast",
                                               memory_budget=150_000_000)).segment(frame)
    assert "tiling fast" in tiled.notes[0] and "one tile" not in tiled.notes[0], tiled.notes[0]
    assert "multi-scale averaging: tiles are approximate" in tiled.notes[0]
    plain = Segmenter(loaded, InferenceOptions(device="cpu", tiling="off")).segment(frame)
    changed, agree = (plain.labels != whole.labels).mean(), (tiled.labels == whole.labels).mean()
    print(f"multi-scale changes {changed:.2%} of the labels; its tiles agree with the whole on {agree:.3%}")
    assert changed > 0.005 and agree > 0.995


def test_mirror_inside_each_size_runs_on_the_image_not_a_padded_canvas(unet_checkpoint: Path) -> None:
    """A width off the stride grid (203; stride 4): each size's pass and its mirror see the image's own columns,
    resized, never the zero canvas that keeps mirrored exact tiles exact."""
    pixels = _pixels(60, 203)
    segmenter = cpu_segmenter(unet_checkpoint, tiling="off", mirror="flip", scales=(0.5, 1.0, 1.5), want_probs=True)
    result = segmenter.segment(ImageData(pixels)).probs
    info = segmenter.info
    x = torch.from_numpy(to_model_input(ImageData(pixels), info.config.in_channels, info.mean, info.std))[None]
    reference = multiscale_runner(mirror_runner(_run(segmenter.model), "logits"), (0.5, 1.0, 1.5), "logits")(x)
    assert result is not None
    np.testing.assert_allclose(result, reference.softmax(1)[0].numpy(), rtol=0, atol=1e-5)


def test_a_whole_image_pass_out_of_memory_retries_in_tiles_with_the_widened_halo(unet_checkpoint: Path) -> None:
    events: list[JobEvent] = []
    segmenter = cpu_segmenter(unet_checkpoint, FaultInjection(frozenset({0})), scales=(0.5, 1.0))
    segmenter.segment(ImageData(_pixels(90, 134)), on_event=events.append)
    warning = next(event for event in events if event.kind == "warning")
    halo = plan_tiles(segmenter, 90, 134, "labels").fast_halo_px
    stride = plan_tiles(segmenter, 90, 134, "labels").stride
    assert halo is not None and halo > FAST_HALO_STRIDES * stride  # the smallest scale's pass sees twice as far
    assert warning.data["halo_px"] == halo


def test_the_lean_engine_gives_the_eager_result(unet_checkpoint: Path) -> None:
    pixels = ImageData(_pixels(96, 128))
    results = [cpu_segmenter(unet_checkpoint, engine=engine, scales=(0.75, 1.0, 1.25), want_probs=True)
               .segment(pixels).probs for engine in ("lean", "eager")]
    assert results[0] is not None and results[1] is not None
    np.testing.assert_allclose(results[0], results[1], rtol=0, atol=1e-4)


def test_segment_says_it_averages_and_a_bad_scale_is_named(tmp_path: Path, unet_checkpoint: Path) -> None:
    image = tmp_path / "a.png"
    cv2.imwrite(str(image), _pixels(40, 48))
    common = ["segment", str(image), "--model", str(unet_checkpoint), "--threads", "1"]
    result = _leanseg(*common, "--out", str(tmp_path / "out"), "--scales", "0.75", "1", "1.25")
    assert result.returncode == 0, result.stderr
    assert "multi-scale averaging at 0.75 1 1.25" in result.stdout
    assert (tmp_path / "out" / "a_labels.png").is_file()
    refused = _leanseg(*common, "--out", str(tmp_path / "bad"), "--scales", "5")
    assert refused.returncode != 0 and "scales must be numbers in 0.25..4, got 5.0" in refused.stderr
    assert not (tmp_path / "bad").exists()


def test_a_batch_resumed_with_other_scales_is_refused(tmp_path: Path, unet_checkpoint: Path) -> None:
    common, out = batch_command(tmp_path, unet_checkpoint)
    assert _leanseg(*common, "--scales", "0.75", "1").returncode == 0
    fingerprint = json.loads((out / "manifest.json").read_text())["fingerprint"]
    assert fingerprint["scales"] == "0.75 1"
    labels = (out / "a_labels.png").read_bytes()
    refused = _leanseg(*common)
    assert refused.returncode == 2 and "made with scales 0.75 1, not scales 1" in refused.stderr, refused.stderr
    assert (out / "a_labels.png").read_bytes() == labels  # nothing redone or lost
    assert _leanseg(*common, "--scales", "1", "0.75").returncode == 0  # the same sizes, in any order, resume
