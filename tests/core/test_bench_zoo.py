"""`leanseg bench --zoo DIR` on a tiny zoo built here (.pt2 + .onnx + card, as ../shared/zoo/build.py writes them),
run as a real subprocess: every configuration is measured, with finite figures, and the engine agrees with eager."""
from __future__ import annotations

import importlib.util
import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.export import Dim

from leanseg.core.benchmarks.zoo import bf16_convolutions, zoo_models

CLASSES = 4
HAS_ORT = importlib.util.find_spec("onnxruntime") is not None


class TinySegNet(nn.Module):
    """conv-BN-ReLU, a stride-2 conv, a 3x3 conv, upsample, add the skip, a 1x1 head: (1, 3, H, W) -> (1, 4, H, W)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.down = nn.Sequential(nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.ReLU6(),
                                  nn.Conv2d(8, 8, 3, padding=1), nn.ReLU())
        self.head = nn.Conv2d(8, CLASSES, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skip = self.stem(x)
        deep = nn.functional.interpolate(self.down(skip), scale_factor=2.0, mode="bilinear", align_corners=False)
        return self.head(skip + deep)


def build_tiny_zoo(folder: Path, name: str = "tiny") -> Path:
    """NAME.pt2 (dynamic H, W multiples of 32), NAME.onnx (dynamic axes) and NAME.json (card_version 1)."""
    torch.manual_seed(0)
    model = TinySegNet().eval()
    for module in model.modules():  # BatchNorm statistics that are not the identity, as build.py does
        if isinstance(module, nn.BatchNorm2d):
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 2.0)
    x = torch.rand(1, 3, 64, 96)
    rows, cols = Dim("r", min=1, max=64), Dim("c", min=1, max=64)
    with torch.no_grad():
        program = torch.export.export(model, (x,), dynamic_shapes={"x": {2: 32 * rows, 3: 32 * cols}})
        torch.export.save(program, folder / f"{name}.pt2")
        torch.onnx.export(model, (x,), str(folder / f"{name}.onnx"), opset_version=17, dynamo=False,
                          input_names=["image"], output_names=["logits"],
                          dynamic_axes={"image": {2: "height", 3: "width"}, "logits": {2: "height", 3: "width"}})
    card = {"card_version": 1, "name": name, "architecture": "a tiny test net",
            "classes": [f"class {i}" for i in range(CLASSES)],
            "input": {"channels": 3, "range": "0..1 RGB, then normalised", "mean": [0.485, 0.456, 0.406],
                      "std": [0.229, 0.224, 0.225], "size_multiple": 32},
            "output": "logits (1, classes, height, width)", "weights": "random, seed 0"}
    (folder / f"{name}.json").write_text(json.dumps(card, indent=2) + "\n")
    return folder


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "leanseg.core", "bench", *args], capture_output=True, text=True,
                          timeout=1200)


@pytest.fixture(scope="module")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("zoo")
    return build_tiny_zoo(folder)


def test_bench_zoo_measures_every_configuration_of_a_zoo_model(zoo: Path, tmp_path: Path) -> None:
    out = tmp_path / "bench"
    proc = bench("--zoo", str(zoo), "--zoo-models", "tiny", "--size", "64", "--repeats", "1", "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    payload = json.loads((out / "bench_zoo.json").read_text())
    assert (out / "bench_zoo.png").stat().st_size > 0
    rows = {row["config"]: row for row in payload["rows"]}
    expected = ["eager no_grad", "engine fp32"] + (["engine bf16"] if bf16_convolutions() else []) + (
        ["onnxruntime"] if HAS_ORT else [])
    for config in expected:
        row = rows[config]
        assert "error" not in row, row
        assert row["peak_bytes"] >= 0 and math.isfinite(row["seconds"]) and row["seconds"] > 0, row
        if config != "eager no_grad":
            assert math.isfinite(row["max_abs_diff"]) and 0.0 <= row["label_agreement"] <= 1.0, row
            assert row["samples"] >= 1
    assert_engine_equals_eager(rows)
    if HAS_ORT:
        assert rows["onnxruntime"]["max_abs_diff"] <= 1e-4
        # its arena off while the peak is measured: it holds the 8 x 64 x 64 stem map
        assert rows["onnxruntime"]["peak_bytes"] >= 8 * 64 * 64 * 4
        assert isinstance(rows["engine fp32"]["x ORT time"], float)
    assert "engine bf16" in str(payload["notes"]) or bf16_convolutions()  # skipped only with a note
    tiny_fp32 = next(line for line in payload["summary"] if line.startswith("tiny fp32:"))
    assert "eager itself at 1 thread(s): " in tiny_fp32, tiny_fp32
    assert "| tiny " in proc.stdout
    assert "the engine's targets, per model" in proc.stdout and "not a fault of the model" in proc.stdout
    assert ("geometric mean of engine fp32 latency / ONNX Runtime's over 1 zoo models" in proc.stdout) == HAS_ORT


def assert_engine_equals_eager(rows: dict[str, dict]) -> None:
    eager = rows["eager no_grad"]  # eager against itself at 1 thread: the floor of "identical"
    assert eager["self_threads"] == 1 and eager["self_label_flips"] >= 0, eager
    assert 0.0 <= eager["self_max_abs_diff"] <= 1e-4, eager
    fp32 = rows["engine fp32"]
    assert fp32["whole_model_fallback"] is False and fp32["eager_nodes"] == 0
    assert fp32["max_abs_diff"] <= 1e-4 and fp32["label_agreement"] == 1.0


def test_bench_zoo_rounds_take_the_median_of_each_rounds_ratio_on_leansegs_own_model(zoo: Path,
                                                                                      tmp_path: Path) -> None:
    """--rounds 2 on leanseg's own MobileUNet (built, not read from the zoo folder; its ONNX exported by bench
    itself): each configuration measured and agreeing with eager, and timed twice, each in a new process; a ratio
    is the median of the two rounds' ratios (their mean), not the ratio of the medians. bf16 is left to the tiny
    zoo model above: on MobileUNet it doubles the test's time and checks nothing this test is about."""
    out = tmp_path / "bench"
    proc = bench("--zoo", str(zoo), "--zoo-models", "MobileUNet", "--zoo-configs", "fp32,ort", "--size", "64",
                 "--repeats", "1", "--rounds", "2", "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    payload = json.loads((out / "bench_zoo.json").read_text())
    assert payload["rounds"] == 2 and "2 latency rounds" in payload["notes"][0]
    rows = {row["config"]: row for row in payload["rows"] if row["model"] == "MobileUNet"}
    assert_engine_equals_eager(rows)
    assert "engine bf16" not in rows
    if HAS_ORT:
        row = rows["onnxruntime"]  # ONNX Runtime runs leanseg's own net from an export bench makes itself
        assert "error" not in row and row["samples"] >= 1 and row["max_abs_diff"] <= 1e-4, row
    eager, fp32 = rows["eager no_grad"], rows["engine fp32"]
    for row in (eager, fp32):
        assert len(row["round_seconds"]) == 2 and all(t > 0 for t in row["round_seconds"])
        assert row["seconds"] == statistics.median(row["round_seconds"])
    ratios = [a / b for a, b in zip(fp32["round_seconds"], eager["round_seconds"])]
    assert fp32["x eager time"] == round(statistics.median(ratios), 3)
    assert "MobileUNet engine fp32 round 2:" in proc.stdout


@pytest.mark.parametrize("extra, message", [
    (("--zoo-models", "nope"), "unknown --zoo-models ['nope']; valid: tiny, MobileUNet, PlainUNet"),
    (("--zoo-configs", "fp64"), "unknown --zoo-configs ['fp64']; valid: eager, fp32, bf16, ort"),
    (("--size", "100"), "--size must be a positive multiple of 32 (got 100)"),
    (("--rounds", "0"), "--rounds >= 1 (got 0)"),
])
def test_bench_zoo_refuses_bad_choices_naming_the_valid_ones(zoo: Path, tmp_path: Path, extra: tuple[str, ...],
                                                             message: str) -> None:
    proc = bench("--zoo", str(zoo), *extra, "--out", str(tmp_path / "bench"))
    assert proc.returncode == 2 and message in proc.stdout, proc.stdout + proc.stderr
    assert not (tmp_path / "bench").exists()


def test_bench_zoo_names_a_folder_without_models(tmp_path: Path) -> None:
    proc = bench("--zoo", str(tmp_path), "--out", str(tmp_path / "bench"))
    assert proc.returncode == 2 and f"{tmp_path}: no .pt2 models in it" in proc.stdout


def test_zoo_takes_one_model_file_of_the_users_own(zoo: Path) -> None:
    assert zoo_models(zoo / "tiny.pt2") == {"tiny": zoo / "tiny.pt2"}
    assert zoo_models(zoo)["tiny"] == zoo / "tiny.pt2"


def test_a_model_file_given_to_inference_models_is_pointed_to_zoo(zoo: Path, tmp_path: Path) -> None:
    proc = bench("--inference-models", str(zoo / "tiny.pt2"), "--out", str(tmp_path / "bench"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"to benchmark a model file of your own, `leanseg bench --zoo {zoo / 'tiny.pt2'}`" in proc.stdout
