"""One option set across `segment`, `batch` and `video`; defaults shown in every --help; real CLI runs."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from leanseg.core.cli import build_parser
from leanseg.core.model.checkpoint import load_checkpoint

INFERRING = ("segment", "batch", "video")


def _leanseg(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "leanseg.core", *args], capture_output=True, text=True, timeout=300)


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_segment_batch_video_share_overlay_alpha_and_device_defaults() -> None:
    parsers = _subparsers()
    required = {"segment": ["x.png", "--out", "o"], "batch": ["in", "--out", "o"], "video": ["v.mp4", "--out", "o.mp4"]}
    for name in INFERRING:
        args = parsers[name].parse_args(required[name])
        assert (args.overlay, args.alpha, args.device) == (True, 0.5, "auto"), name
        assert parsers[name].parse_args([*required[name], "--no-overlay"]).overlay is False
    for name in ("segment", "batch"):
        assert parsers[name].parse_args(required[name]).probs is False
        assert parsers[name].parse_args([*required[name], "--probs"]).probs is True
    for name in ("bench", "profile", "train"):
        extra = ["--data", "d", "--out", "o"] if name == "train" else []
        assert parsers[name].parse_args(extra).device == "auto", name


def test_every_option_with_a_default_says_it_in_help() -> None:
    missing = []
    for name in (*INFERRING, "bench", "profile", "train", "plot-memory"):
        parser = _subparsers()[name]
        formatter = parser._get_formatter()
        for action in parser._actions:
            shown = action.default is not None and action.default is not False and action.default not in ("",
                                                                                                          "==SUPPRESS==")
            if action.option_strings and shown and action.help != argparse.SUPPRESS:
                text = formatter._expand_help(action) if action.help else ""  # type: ignore[attr-defined]
                if "default" not in text:
                    missing.append(f"{name} {action.option_strings[0]}")
        for action in parser._actions:
            if not action.option_strings and not isinstance(action, argparse._SubParsersAction):
                assert action.help, f"{name}: positional {action.dest} has no help"
    assert not missing, missing


def test_help_texts_in_a_real_process() -> None:
    segment = _leanseg("segment", "--help")
    assert segment.returncode == 0
    assert "--overlay, --no-overlay" in segment.stdout and "(default: on)" in segment.stdout  # as typed, not True
    assert "IMAGE" in segment.stdout and "image files (PNG, JPEG" in segment.stdout
    train = _leanseg("train", "--help")
    assert "(default: 8)" in train.stdout and "(default: auto)" in train.stdout  # --batch-size, --device
    assert "training crop (default: 256 320)" in train.stdout  # a pair as it is typed, not (256, 320)
    profile = _leanseg("profile", "--help")
    assert "--chart-format {png,svg,pdf}" in profile.stdout and "(default: auto)" in profile.stdout


@pytest.mark.parametrize("command", ["segment", "batch"])
def test_segment_and_batch_help_end_with_their_exit_codes(command: str) -> None:
    shown = _leanseg(command, "--help")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.rstrip().endswith(
        "\nexit code: 0 every image is segmented, 1 some failed, 2 usage error, 130 stopped before the end")


def test_segment_alpha_probs_no_overlay_and_a_10tb_budget(tmp_path: Path, tiny_checkpoint: Path,
                                                          rgb_image: Path) -> None:
    common = ["--model", str(tiny_checkpoint), "--device", "cpu", "--engine", "eager"]
    done = _leanseg("segment", str(rgb_image), "--out", str(tmp_path / "a"), "--alpha", "1", "--probs",
                    "--memory-budget", "10TB", *common)
    assert done.returncode == 0, done.stderr
    labels = cv2.imread(str(tmp_path / "a" / "input_labels.png"), cv2.IMREAD_UNCHANGED)
    overlay = cv2.cvtColor(cv2.imread(str(tmp_path / "a" / "input_overlay.png")), cv2.COLOR_BGR2RGB)
    colours = np.array(load_checkpoint(tiny_checkpoint).info.class_colours, np.uint8)
    assert np.array_equal(overlay, colours[labels])  # alpha 1: the class colours alone
    probs = np.load(tmp_path / "a" / "input_probs.npy")
    assert probs.dtype == np.float16 and probs.shape == (4, *labels.shape)
    assert np.array_equal(probs.astype(np.float32).argmax(axis=0), labels)

    done = _leanseg("segment", str(rgb_image), "--out", str(tmp_path / "b"), "--no-overlay", *common)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "b").iterdir() if not p.name.startswith(".")) == ["input_labels.png"]

    bad = _leanseg("segment", str(rgb_image), "--out", str(tmp_path / "c"), "--alpha", "2", *common)
    assert bad.returncode == 2 and "--alpha: must be from 0 (invisible) to 1 (opaque), got 2.0" in bad.stderr


def test_batch_writes_overlays_by_default_at_the_given_alpha(tmp_path: Path, tiny_checkpoint: Path,
                                                            rgb_image: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    rgb_image.rename(folder / "input.png")
    common = ["--model", str(tiny_checkpoint), "--device", "cpu", "--engine", "eager"]
    done = _leanseg("batch", str(folder), "--out", str(tmp_path / "out"), "--alpha", "0", *common)
    assert done.returncode == 0, done.stderr
    image = cv2.imread(str(folder / "input.png"))
    assert np.array_equal(cv2.imread(str(tmp_path / "out" / "input_overlay.png")), image)  # alpha 0: the image
    done = _leanseg("batch", str(folder), "--out", str(tmp_path / "bare"), "--no-overlay", *common)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "bare" / "input_overlay.png").exists() and (tmp_path / "bare" / "input_labels.png").exists()


@pytest.mark.parametrize("command", ["bench", "profile"])
def test_bench_and_profile_refuse_a_missing_cuda_device_in_one_line(command: str) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA is present here")
    done = _leanseg(command, "--device", "cuda")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "CUDA is not available here" in done.stderr and "make torch TORCH_INDEX=" in done.stderr


def test_a_bare_leanseg_is_a_usage_error_that_lists_the_commands() -> None:
    """Exit 2 as argparse's usage errors, the listing on stderr; `leanseg --help` still succeeds."""
    result = subprocess.run([sys.executable, "-m", "leanseg.core"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "usage: leanseg" in result.stderr and "segment" in result.stderr and not result.stdout
    assert result.stderr.splitlines()[-1] == "leanseg: error: name a COMMAND (leanseg COMMAND --help: its options)"
    asked = _leanseg("--help")
    assert asked.returncode == 0 and "usage: leanseg" in asked.stdout and not asked.stderr


def test_a_reader_that_leaves_early_ends_the_command_quietly() -> None:
    """`leanseg models --check | head -1`: the next print meets a closed pipe; no traceback, exit 141."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # each line reaches the pipe when printed, as on a terminal
    proc = subprocess.Popen([sys.executable, "-m", "leanseg.core", "models", "--check"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith("shipped: ")
    proc.stdout.close()  # the reader leaves while the model is being opened, before the next line
    stderr = proc.stderr.read()
    assert proc.wait(timeout=120) == 141
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr


def test_the_command_listing_names_every_command_module_and_loads_no_torch() -> None:
    import importlib
    import pkgutil

    from leanseg.core import commands

    registering = {info.name for info in pkgutil.iter_modules(commands.__path__)
                   if hasattr(importlib.import_module(f"{commands.__name__}.{info.name}"), "register")}
    assert {commands.module_name(name) for name in commands.SUMMARIES} == registering
    assert set(_subparsers()) == set(commands.SUMMARIES)
    code = ("import sys; from leanseg.core.cli import main; code = main([]); "
            "print('torch loaded' if 'torch' in sys.modules else 'no torch', code)")
    listing = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert listing.stdout.strip() == "no torch 2", listing.stderr  # the listing goes to stderr, a usage error
    for name, summary in commands.SUMMARIES.items():
        assert f"{name}" in listing.stderr and summary in listing.stderr.replace("\n", " ")


def test_one_command_line_builds_its_own_parser_in_full() -> None:
    result = _leanseg("train", "--data", "d", "--out", "o", "--lovasz", "-2", "--epochs", "1")
    assert result.returncode != 0 and "lovasz_weight must be >= 0" in result.stderr
    result = _leanseg("train", "--data", "d", "--out", "o", "--ohem", "0", "--epochs", "1")
    assert result.returncode != 0 and "ohem_fraction must be in (0, 1], got 0.0" in result.stderr
    assert _leanseg("eval", "--help").stdout.startswith("usage: leanseg eval")
