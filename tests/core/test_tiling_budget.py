"""The memory budget holds (issue 18, finding 10): tiles that fit under the default budget, a budget below
the smallest tile refused, tile progress from `leanseg segment`, Ctrl-C stops within a tile."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from leanseg.core.engine.tile_budget import DEFAULT_MAX_TILE_BYTES
from leanseg.core.engine.tile_plan import BudgetTooSmallError
from leanseg.core.engine.tiling import eager_runner, plan_runner
from leanseg.core.events import JobCancelled
from leanseg.core.model import MobileUNet, MobileUNetConfig
from leanseg.core.model.checkpoint import LoadedModel, default_info
from leanseg.core.predict import InferenceOptions, Segmenter
from leanseg.core.segment_tiled import plan_tiles

from .conftest import TINY_MOBILE


def _segmenter(config: MobileUNetConfig, budget: int | None = None) -> Segmenter:
    torch.manual_seed(0)
    loaded = LoadedModel(MobileUNet(config).eval(), default_info(config))
    return Segmenter(loaded, InferenceOptions(device="cpu", memory_budget=budget))


def test_default_budget_plans_tiles_of_bounded_size_for_a_30000_px_image() -> None:
    """The shipped architecture on a 30000 x 30000 RGB picture: under half of RAM it planned 6.5-8.5 GB
    tiles that ran for minutes each; every tile now stays under DEFAULT_MAX_TILE_BYTES."""
    segmenter = _segmenter(MobileUNetConfig())
    side = 30_000
    plan = plan_tiles(segmenter, side, side, "labels", held_bytes=side * side * 4)  # RGB pixels + labels
    assert plan.mode == "exact" and plan.tile_bytes is not None
    assert plan.tile_bytes <= DEFAULT_MAX_TILE_BYTES, plan.describe()
    rows, cols = plan.grid
    assert rows * cols >= 9, plan.describe()


def test_a_given_budget_is_held_or_refused() -> None:
    segmenter = _segmenter(TINY_MOBILE, budget=20_000_000)
    with pytest.raises(BudgetTooSmallError, match="give --memory-budget at least"):
        plan_tiles(segmenter, 1500, 1500, "labels", held_bytes=1500 * 1500 * 4)
    fits = _segmenter(TINY_MOBILE, budget=40_000_000)
    plan = plan_tiles(fits, 1500, 1500, "labels", held_bytes=1500 * 1500 * 4)
    assert plan.tile_bytes is not None and plan.tile_bytes + plan.held_bytes <= 40_000_000


@pytest.mark.parametrize("engine", ["lean", "eager"])
def test_a_set_cancel_stops_a_tile_between_steps(engine: str) -> None:
    segmenter = _segmenter(TINY_MOBILE)
    cancel = threading.Event()
    runner = (plan_runner(segmenter.plan, "labels", cancel=cancel) if engine == "lean"
              else eager_runner(segmenter.model, torch.device("cpu"), cancel=cancel))
    x = torch.zeros(1, 3, 64, 64)
    assert runner(x).shape[-2:] == (64, 64)
    cancel.set()
    with pytest.raises(JobCancelled):
        runner(x)


def _leanseg(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "leanseg.core", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


@pytest.fixture
def big_image(tmp_path: Path) -> Path:
    path = tmp_path / "big.png"
    rng = np.random.default_rng(0)
    cv2.imwrite(str(path), rng.integers(0, 255, (1500, 1500, 3), dtype=np.uint8))
    return path


def test_budget_below_the_smallest_tile_is_a_usage_error(tmp_path: Path, tiny_checkpoint: Path,
                                                         big_image: Path) -> None:
    out = tmp_path / "out"
    process = _leanseg("segment", str(big_image), "--out", str(out), "--model", str(tiny_checkpoint),
                       "--device", "cpu", "--memory-budget", "1KB")
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 2, stderr
    assert stderr.strip().splitlines() == [stderr.strip()] and "below what the smallest tile needs" in stderr
    assert not list(out.glob("*_labels.png")) if out.exists() else True


def test_a_tiled_image_says_its_tiles_once(tmp_path: Path, tiny_checkpoint: Path, big_image: Path) -> None:
    """Not a line per tile: a progress line (a bar on a terminal), then one line saying what the tiles measured,
    and the image's line saying how much of the budget the tensors took beside the process peak."""
    process = _leanseg("segment", str(big_image), "--out", str(tmp_path / "out"), "--model", str(tiny_checkpoint),
                       "--device", "cpu", "--memory-budget", "60MB", "--mirror", "off", "--threads", "1")
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr
    assert "tiling exact: 2 rows x 2 columns" in stdout
    assert not [line for line in stdout.splitlines() if line.strip().startswith("tile ")]  # no line per tile
    assert re.search(r"^  big\.png: 4 tiles of \d+x\d+ px, each at most [\d.]+ \w?B of engine tensors$", stdout,
                     re.MULTILINE), stdout
    assert re.search(r"tensor peak [\d.]+ \w?B \(tiles and image arrays\) of the 60\.0 MB budget; "
                     r"process peak [\d.]+ \w?B \([\d.]+ \w?B above the start\)", stdout), stdout
    assert stderr.splitlines()[-1].startswith("tiles 4/4 "), stderr  # the last progress line, on stderr


def test_ctrl_c_stops_within_a_tile(tmp_path: Path, tiny_checkpoint: Path, big_image: Path) -> None:
    out = tmp_path / "out"
    process = _leanseg("segment", str(big_image), "--out", str(out), "--model", str(tiny_checkpoint),
                       "--device", "cpu", "--memory-budget", "40MB", "--mirror", "off")
    assert process.stderr is not None
    total = 0  # tiles in the image, from the first progress line
    for line in process.stderr:  # the progress line after the first tile
        if line.startswith("tiles 1/"):
            total = int(line.split("/")[1].split()[0])
            process.send_signal(signal.SIGINT)
            break
    stdout, rest = process.communicate(timeout=300)
    assert total, "no 'tiles 1/N' progress line before the end"
    assert process.returncode == 130, rest
    stopped = re.search(r"stopped by Ctrl-C after (\d+) of (\d+) tiles; the image in flight was not written", rest)
    assert stopped, rest
    assert total >= 20 and int(stopped.group(1)) <= 2, f"{stopped.group(1)} of {total} tiles ran in all"
    assert "Traceback" not in rest and " tiles of " not in stdout
    assert not list(out.glob("*_labels.png"))
