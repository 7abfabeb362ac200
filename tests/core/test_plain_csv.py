"""The CSVs leanseg writes open anywhere: one header row, units in the column names, metadata in a JSON
sidecar; read here with csv.DictReader and (when installed) pandas, after real CLI runs."""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from leanseg.core.memory import read_memory_csv
from leanseg.core.model import MobileUNet
from leanseg.core.model.checkpoint import default_info, save_checkpoint

from .conftest import TINY_MOBILE
from .video_samples import write_video

MEMORY_COLUMNS = ["time_s", "allocated_bytes", "reserved_bytes", "peak_allocated_bytes", "rss_bytes",
                  "engine_live_bytes", "mark"]
SUMMARY_COLUMNS = ["file", "width_px", "height_px", "time_s", "peak_bytes", *(f"fraction class {k}" for k in range(4)),
                   "status", "error", "note"]
VIDEO_COLUMNS = ["frame_index", "time_s", *(f"fraction class {k}" for k in range(4))]


def _leanseg(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "leanseg.core", *args], capture_output=True, text=True, timeout=300)


def _dict_rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        return list(reader.fieldnames or []), list(reader)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One `leanseg batch --memory-log` and one `leanseg video` run, shared by the tests below."""
    root = tmp_path_factory.mktemp("plain_csv")
    torch.manual_seed(0)
    checkpoint = save_checkpoint(root / "tiny.safetensors", MobileUNet(TINY_MOBILE).eval(), default_info(TINY_MOBILE))
    folder = root / "images"
    folder.mkdir()
    rng = np.random.default_rng(1)
    for name in ("a", "b"):
        cv2.imwrite(str(folder / f"{name}.png"), rng.integers(0, 255, (40, 56, 3), dtype=np.uint8))
    common = ["--model", str(checkpoint), "--device", "cpu", "--engine", "eager"]
    done = _leanseg("batch", str(folder), "--out", str(root / "out"), "--memory-log", str(root / "memory.csv"),
                    *common)
    assert done.returncode == 0, done.stderr
    source = write_video(root / "in.mp4", frames=3, fps=10.0)
    done = _leanseg("video", str(source), "--out", str(root / "seg.mp4"), *common)
    assert done.returncode == 0, done.stderr
    return root


def test_batch_summary_csv_reads_with_dictreader(runs: Path) -> None:
    columns, rows = _dict_rows(runs / "out" / "summary.csv")
    assert columns == SUMMARY_COLUMNS
    assert [(r["file"], r["width_px"], r["height_px"], r["status"]) for r in rows] == [
        ("a.png", "56", "40", "ok"), ("b.png", "56", "40", "ok")]
    assert all(float(r["time_s"]) > 0 and int(r["peak_bytes"]) >= 0 for r in rows)


def test_memory_log_reads_with_dictreader_and_has_a_json_sidecar(runs: Path) -> None:
    log = runs / "memory.csv"
    columns, rows = _dict_rows(log)
    assert columns == MEMORY_COLUMNS  # the first line is the header: no comment lines before it
    samples = [r for r in rows if not r["mark"]]
    assert len(samples) >= 2 and all(int(r["allocated_bytes"]) > 0 for r in samples)
    assert [r["mark"] for r in rows if r["mark"]][0] == "start"
    meta = json.loads((runs / "memory.json").read_text())
    assert meta["format"] == "leanseg memory log" and meta["device"] == "cpu" and meta["csv"] == "memory.csv"
    assert set(meta["columns"]) == set(MEMORY_COLUMNS)
    assert read_memory_csv(log).meta["device"] == "cpu"  # the reader takes the sidecar's metadata


def test_video_csv_reads_with_dictreader(runs: Path) -> None:
    columns, rows = _dict_rows(runs / "seg.csv")
    assert columns == VIDEO_COLUMNS
    assert [int(r["frame_index"]) for r in rows] == [0, 1, 2]
    assert [float(r["time_s"]) for r in rows] == pytest.approx([0.0, 0.1, 0.2])
    assert all(sum(float(r[c]) for c in columns[2:]) == pytest.approx(1.0, abs=1e-4) for r in rows)


def test_all_three_read_with_pandas(runs: Path) -> None:
    pandas = pytest.importorskip("pandas")
    summary = pandas.read_csv(runs / "out" / "summary.csv")
    assert list(summary.columns) == SUMMARY_COLUMNS and summary["width_px"].tolist() == [56, 56]
    memory = pandas.read_csv(runs / "memory.csv")
    assert list(memory.columns) == MEMORY_COLUMNS and memory["allocated_bytes"].max() > 0
    video = pandas.read_csv(runs / "seg.csv")
    assert list(video.columns) == VIDEO_COLUMNS and video["frame_index"].tolist() == [0, 1, 2]


def test_old_memory_logs_with_comment_lines_still_read(tmp_path: Path) -> None:
    old = tmp_path / "old.csv"
    old.write_text("# leanseg memory log\n# device: cpu\n# source: glibc\n# rate_hz: 10.0\n"
                   + ",".join(MEMORY_COLUMNS) + "\n0.0000,10,20,10,30,0,\n0.0500,,,,,,start\n0.1000,12,20,12,30,0,\n")
    log = read_memory_csv(old)
    assert log.meta == {"device": "cpu", "source": "glibc", "rate_hz": "10.0"}
    assert log.series["allocated"].tolist() == [10, 12] and log.marks == [(0.05, "start")]
