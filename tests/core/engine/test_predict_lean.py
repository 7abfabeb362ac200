"""Segmenter uses the engine by default; --engine eager keeps plain PyTorch; both agree."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from leanseg.core.engine import Plan
from leanseg.core.io.images import read_image
from leanseg.core.model.checkpoint import load_checkpoint
from leanseg.core.predict import InferenceOptions, Segmenter


def test_lean_is_the_default_and_matches_eager(tiny_checkpoint: Path, rgb_image: Path) -> None:
    assert InferenceOptions().engine == "lean"
    image = read_image(rgb_image)
    lean = Segmenter(load_checkpoint(tiny_checkpoint), InferenceOptions(device="cpu"))
    eager = Segmenter(load_checkpoint(tiny_checkpoint), InferenceOptions(device="cpu", engine="eager"))
    assert isinstance(lean.plan, Plan) and eager.plan is None
    a, b = lean.segment(image), eager.segment(image)
    assert a.labels.shape == (image.height, image.width) and a.labels.dtype == np.uint8
    assert np.array_equal(a.labels, b.labels)


def test_lean_probs_match_eager(tiny_checkpoint: Path, rgb_image: Path) -> None:
    image = read_image(rgb_image)
    lean = Segmenter(load_checkpoint(tiny_checkpoint), InferenceOptions(device="cpu", want_probs=True))
    eager = Segmenter(load_checkpoint(tiny_checkpoint),
                      InferenceOptions(device="cpu", engine="eager", want_probs=True))
    a, b = lean.segment(image), eager.segment(image)
    assert a.probs is not None and b.probs is not None
    assert np.abs(a.probs - b.probs).max() <= 1e-4


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_lean_on_cuda_matches_cpu(tiny_checkpoint: Path, rgb_image: Path) -> None:
    image = read_image(rgb_image)
    gpu = Segmenter(load_checkpoint(tiny_checkpoint), InferenceOptions(device="cuda"))
    cpu = Segmenter(load_checkpoint(tiny_checkpoint), InferenceOptions(device="cpu", engine="eager"))
    assert gpu.plan is not None and gpu.plan.device.type == "cuda"
    x = gpu.prepare(image)
    logits = gpu.plan.run(x, output="logits")
    with torch.inference_mode():
        expected = cpu.model(x.cpu())
    assert (logits.cpu() - expected).abs().max().item() <= 1e-3  # cuDNN vs oneDNN summation order
    assert gpu.plan.last_stats is not None and gpu.plan.last_stats.peak_bytes > 0
