"""Memory profile: per-step accounting against the engine's own, lower bounds, JSON, cancel, CLI."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
import torch

from leanseg.core.engine import compile as compile_plan
from leanseg.core.events import JobCancelled
from leanseg.core.memory import format_bytes
from leanseg.core.model import MobileUNet, MobileUNetConfig
from leanseg.core.model.checkpoint import load_checkpoint
from leanseg.core.profile import (
    LabRequest,
    LabResult,
    MemoryProfile,
    ModelSpec,
    eager_profile,
    engine_profile,
    lower_bounds,
)
from leanseg.core.profile.runner import run_case_cancellable

from .conftest import TINY_MOBILE


def _tiny_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return MobileUNet(TINY_MOBILE).eval()


def _assert_alive_explains_live(profile: MemoryProfile) -> None:
    for step in profile.steps:
        assert sum(t.nbytes for t in step.alive) == step.live_bytes, step.layer
        assert step.peak_bytes >= step.live_bytes


def test_eager_profile_steps_explain_live_bytes() -> None:
    x = torch.randn(1, 3, 64, 64)
    profile = eager_profile(_tiny_model(), x, measure_hidden=False)
    assert profile.mode == "eager" and profile.input_shape == (1, 3, 64, 64)
    _assert_alive_explains_live(profile)
    assert all(s.workspace_bytes == 0 for s in profile.steps)
    last = profile.steps[-1]
    assert [t.shape for t in last.alive] == [(1, 4, 64, 64)]  # only the logits are left


def test_eager_peak_of_mobileunet_is_an_expanded_tensor() -> None:
    """The step that sets eager's peak holds an inverted residual's expanded tensor. Every tensor scales with
    H x W, so 256 x 256 ranks the steps as 1024 x 1024 does (the 1024 figures come from `leanseg profile`)."""
    model = MobileUNet(MobileUNetConfig()).eval()
    profile = eager_profile(model, torch.randn(1, 3, 256, 256), measure_hidden=False, warmup=False)
    peak = profile.peak_step
    assert peak is not None and "block" in peak.layer
    expanded = [t for t in peak.running if ".expand." in t.layer]
    assert expanded and expanded[0].shape[1] == 160, [t.layer for t in peak.running]  # decoder.3: 40 x 4 channels
    biggest = max(peak.running, key=lambda t: t.nbytes)
    assert biggest.nbytes == expanded[0].nbytes


def test_engine_profile_matches_engine_accounting() -> None:
    model = _tiny_model()
    x = torch.randn(1, 3, 96, 64)
    plan = compile_plan(model, device="cpu")
    profile = engine_profile(plan, x)
    assert plan.last_stats is not None
    assert profile.peak_bytes >= plan.last_stats.peak_bytes  # plus what was measured beyond the accounting
    assert all(s.peak_bytes >= r.peak_bytes for s, r in zip(profile.steps, plan.last_stats.steps))
    assert [s.live_bytes for s in profile.steps] == [r.live_bytes for r in plan.last_stats.steps]
    _assert_alive_explains_live(profile)
    assert not any("differ" in note for note in profile.notes)
    assert any(s.workspace_bytes > 0 for s in profile.steps)  # banded blocks hold band temporaries


def test_lower_bounds_order() -> None:
    model = _tiny_model()
    shape = (1, 3, 64, 64)
    bounds = lower_bounds(model, shape)
    engine = compile_plan(model, device="cpu")
    assert 0 < bounds.pieces_bytes < bounds.whole_bytes
    assert bounds.pieces_bytes <= engine.estimate_peak(shape)
    eager = eager_profile(model, torch.empty(shape, device="meta"))
    assert bounds.whole_bytes <= eager.peak_bytes


def test_profile_and_result_round_trip_json() -> None:
    profile = eager_profile(_tiny_model(), torch.randn(1, 3, 32, 32), measure_hidden=False)
    again = MemoryProfile.from_dict(json.loads(json.dumps(profile.to_dict())))
    assert again == profile
    result = LabResult("tiny", 32, "cpu", [{"name": "eval no_grad", "peak_bytes": 5, "seconds": 0.1}], profile)
    assert LabResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result


def test_bad_requests_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown configurations"):
        LabRequest(ModelSpec(None, {"kind": "MobileUNet"}), configurations=("train fancy",))
    with pytest.raises(ValueError, match="size"):
        LabRequest(ModelSpec(None, {"kind": "MobileUNet"}), size=4)
    with pytest.raises(ValueError, match="unknown model kind"):
        ModelSpec(None, {"kind": "ResNet"})


def test_cancel_terminates_the_running_configuration(tiny_checkpoint: Path) -> None:
    cancel = threading.Event()
    threading.Timer(1.0, cancel.set).start()
    start = time.monotonic()
    with pytest.raises(JobCancelled):
        run_case_cancellable("leanseg.core.profile.cases:train_case",
                             {"spec": ModelSpec(str(tiny_checkpoint)).to_dict(), "size": 2048,
                              "checkpointing": False, "repeats": 9}, cancel=cancel)
    assert time.monotonic() - start < 10
    assert psutil.Process().children() == []


def test_cli_profile_writes_json_and_charts(tmp_path: Path, tiny_checkpoint: Path) -> None:
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "leanseg.core", "profile", "--model", str(tiny_checkpoint),
                             "--size", "64", "--repeats", "1", "--configs", "eval no_grad", "--out", str(out)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "eager no_grad: profile" in result.stdout and "lower bound, in pieces" in result.stdout
    data = LabResult.from_dict(json.loads((out / "memory_lab.json").read_text()))
    assert [r["name"] for r in data.rows] == ["eval no_grad"] and data.rows[0]["peak_bytes"] > 0
    assert data.eager is not None and data.engine is not None and data.bounds is not None
    assert data.engine.peak_bytes == max(s.peak_bytes for s in data.engine.steps)
    assert {p.name for p in out.glob("*.png")} == {"memory_lab_peak.png", "memory_lab_time.png",
                                                   "memory_lab_steps.png"}
    assert load_checkpoint(tiny_checkpoint).info.config == TINY_MOBILE


def test_cli_profile_missing_model_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "no.safetensors"
    result = subprocess.run([sys.executable, "-m", "leanseg.core", "profile", "--model", str(missing)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "no.safetensors: no such file" in result.stderr


def test_cli_profile_a_model_that_does_not_load_is_one_line_before_the_lab(tmp_path: Path) -> None:
    garbage = tmp_path / "net.onnx"
    garbage.write_bytes(b"not a graph")
    out = tmp_path / "lab"
    result = subprocess.run([sys.executable, "-m", "leanseg.core", "profile", "--model", str(garbage), "--out",
                             str(out)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stdout == "" and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"leanseg: error: {garbage}: not a model file") and not out.exists()


def test_the_tiled_row_raises_a_budget_too_small_for_the_smallest_tile(tiny_checkpoint: Path) -> None:
    """At 64 px a quarter of the whole image's estimate cannot hold one tile with its halo: the row runs at the
    least the tiles need, and says so, instead of failing."""
    from leanseg.core.benchmarks.measure import Probe
    from leanseg.core.profile.cases import engine_tiled_case

    row = engine_tiled_case(Probe("cpu"), ModelSpec(str(tiny_checkpoint)).to_dict(), size=64, repeats=1)
    assert "error" not in row and row["peak_bytes"] >= 0  # measured (at 64 px it may all fit memory already held)
    assert row["notes"][0].startswith("budget raised to ")
    assert "for the smallest tile (a quarter of the whole image's estimate, " in row["notes"][0]
    assert f"within budget {format_bytes(row['budget_bytes'])}" in row["notes"][1]


def test_a_failing_configuration_is_one_line_not_a_traceback(tiny_checkpoint: Path) -> None:
    row = run_case_cancellable("leanseg.core.profile.cases:eager_case",
                               {"spec": ModelSpec(str(tiny_checkpoint)).to_dict(), "size": 32, "grad_mode": "fast",
                                "repeats": 1})
    assert row == {"error": "ValueError: unknown grad mode 'fast'; valid: grad, no_grad, inference_mode"}
