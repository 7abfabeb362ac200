"""An attention block in an `.onnx` (MAnet's, DANet's position attention): run-time reshapes, transposes,
a matmul of two run-time tensors and a softmax import to the engine IR and run with no eager node."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from leanseg.core.engine import compile
from leanseg.core.model.sources import load_model

from . import export_nets as nets

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_position_attention_imports_and_equals_eager(tmp_path: Path) -> None:
    model = nets.made("position_attention")
    path = tmp_path / "attention.onnx"
    nets.export_onnx(model, path)
    plan = compile(load_model(path).model, device="cpu")
    assert not plan.fallbacks, plan.fallbacks
    for height, width in ((64, 96), (96, 64)):  # the attention's h * w follows the input
        x = torch.randn(1, 3, height, width, generator=torch.Generator().manual_seed(height))
        with torch.inference_mode():
            expected = model(x)
        assert (plan.run(x, output="logits") - expected).abs().max().item() <= 1e-4
