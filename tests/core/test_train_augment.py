"""Photometric augmentation: exposure and colour cast take a white sky to dusk; geometry and labels are
untouched; a resume state written before these options existed still continues."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors import safe_open

from leanseg.core.train.augment import AugmentConfig, augment
from leanseg.core.train.options import TrainConfig

from .test_train import make_dataset, train_args

IGNORE = 255


def _white_sky(draws: int, config: AugmentConfig) -> np.ndarray:
    """The mean RGB of a (250, 253, 253) daytime sky after each of `draws` augmentations."""
    image = np.empty((64, 80, 3), np.uint8)
    image[:] = (250, 253, 253)
    label = np.zeros((64, 80), np.uint8)
    rng = np.random.default_rng(0)
    return np.array([augment(image, label, config, rng, IGNORE)[0].reshape(-1, 3).mean(axis=0)
                     for _ in range(draws)])


def test_exposure_takes_a_white_sky_to_dusk_and_jitter_alone_does_not() -> None:
    crop = (32, 32)
    dusk = 174  # CamVid 0001TP's sky: RGB mean (147, 169, 174)
    jitter_only = _white_sky(200, AugmentConfig(crop=crop, jitter=0.3))
    assert jitter_only.max(axis=1).min() > dusk  # +-30% brightness never darkens a white sky that far
    with_exposure = _white_sky(200, AugmentConfig(crop=crop, jitter=0.3, exposure=(-1.5, 0.5)))
    darkened = (with_exposure.max(axis=1) <= dusk).mean()
    assert 0.2 < darkened < 0.8  # a share of the draws, not all of them


def test_colour_cast_tints_a_grey_image_channel_by_channel() -> None:
    image = np.full((40, 40, 3), 120, np.uint8)
    label = np.zeros((40, 40), np.uint8)
    rng = np.random.default_rng(1)
    config = AugmentConfig(crop=(40, 40), scale_range=(1.0, 1.0), flip=False, jitter=0.0, colour_cast=0.2)
    spreads = []
    for _ in range(50):
        out = augment(image, label, config, rng, IGNORE)[0].reshape(-1, 3).astype(float)
        assert np.ptp(out, axis=0).max() <= 0  # one gain per channel, the same over the whole image
        channels = out[0]
        assert (channels >= 120 * 0.8 - 1).all() and (channels <= 120 * 1.2 + 1).all()
        spreads.append(np.ptp(channels))
    assert np.mean(spreads) > 10  # the channels move apart: a tint, not a brightness change


def test_photometric_options_leave_the_crop_and_labels_alone() -> None:
    rng_image = np.random.default_rng(2)
    image = rng_image.integers(20, 120, (90, 110, 3), dtype=np.uint8)
    label = rng_image.integers(0, 11, (90, 110), dtype=np.uint8)
    plain = AugmentConfig(crop=(48, 64), scale_range=(0.5, 2.0), jitter=0.0)
    tinted = AugmentConfig(crop=(48, 64), scale_range=(0.5, 2.0), jitter=0.0, exposure=(-0.5, 0.5), colour_cast=0.1)
    for seed in range(10):
        image_a, label_a = augment(image, label, plain, np.random.default_rng(seed), IGNORE)
        image_b, label_b = augment(image, label, tinted, np.random.default_rng(seed), IGNORE)
        np.testing.assert_array_equal(label_a, label_b)
        for channel in range(3):  # the same pixels, each channel scaled by one gain in 2**[-0.5, 0.5] * [0.9, 1.1]
            a, b = image_a[..., channel].astype(float), image_b[..., channel].astype(float)
            gain = b.sum() / a.sum()
            assert 2 ** -0.5 * 0.9 - 0.01 <= gain <= 2 ** 0.5 * 1.1 + 0.01
            assert np.abs(b - a * gain).max() <= 1.0


def test_photometric_options_are_validated() -> None:
    with pytest.raises(ValueError, match="exposure"):
        AugmentConfig(exposure=(0.5, -0.5))
    with pytest.raises(ValueError, match="colour_cast"):
        AugmentConfig(colour_cast=1.0)
    with pytest.raises(ValueError, match="exposure"):
        TrainConfig(data_dir="", spec_path="", out_dir="", exposure=(1.0, 0.0))


def test_resume_state_from_before_the_photometric_options_continues(tmp_path: Path) -> None:
    """A last.pt whose options predate --exposure / --colour-cast resumes when they are at their defaults,
    and is refused when they are not; the options a run used land in its weights' provenance."""
    data = make_dataset(tmp_path / "data", train=4, val=2)
    run = tmp_path / "run"
    first = subprocess.run(train_args(data, run, epochs=2), capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr
    state = torch.load(run / "last.pt", weights_only=True)
    for key in ("exposure", "colour_cast"):
        del state["config"][key]
    torch.save(state, run / "last.pt")
    refused = subprocess.run(train_args(data, run, epochs=2) + ["--exposure", "-1", "0", "--resume"],
                             capture_output=True, text=True, timeout=600)
    assert refused.returncode == 2 and "other options" in refused.stderr
    resumed = subprocess.run(train_args(data, run, epochs=2) + ["--resume"], capture_output=True, text=True,
                             timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming after epoch 2" in resumed.stdout

    tinted = tmp_path / "tinted"
    result = subprocess.run(train_args(data, tinted, epochs=1) + ["--exposure", "-1.5", "0.5", "--colour-cast", "0.1"],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    with safe_open(str(tinted / "best.safetensors"), "pt") as weights:
        train_config = json.loads(weights.metadata()["leanseg"])["provenance"]["train_config"]
    assert train_config["exposure"] == [-1.5, 0.5] and train_config["colour_cast"] == 0.1
