"""One writer per output folder (issue 18, finding 4): two real `leanseg batch` processes on one folder.

The first is paused (SIGSTOP) while it holds the lock, so the second meets it for sure; then the first
is killed with SIGKILL, and a third run takes over the stale lock file and finishes the job."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import cv2
import numpy as np

from leanseg.core.jobs.folder_lock import LOCK_NAME

IMAGES = 24


def _command(in_dir: Path, out_dir: Path, checkpoint: Path) -> list[str]:
    return [sys.executable, "-m", "leanseg.core", "batch", str(in_dir), "--out", str(out_dir), "--overlay",
            "--model", str(checkpoint), "--device", "cpu", "--threads", "1", "--engine", "eager"]


def _wait_until_writing(process: subprocess.Popen[str], out_dir: Path, labels: int) -> dict[str, object]:
    """Wait until the run holds the lock and wrote `labels` labels PNGs; the lock file's content."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and process.poll() is None:
        lock = out_dir / LOCK_NAME
        if lock.exists() and len(list(out_dir.glob("*_labels.png"))) >= labels:
            text = lock.read_text()
            if text.strip():
                return dict(json.loads(text))
        time.sleep(0.005)
    process.kill()
    out, err = process.communicate()
    raise AssertionError(f"the batch ended (rc {process.returncode}) before writing {labels} outputs: {out}{err}")


def _wait_until_stopped(pid: int) -> None:
    """Wait until every thread of `pid` is stopped (state T in /proc/PID/task/*/stat)."""
    deadline = time.monotonic() + 30
    states: list[str] = []
    while time.monotonic() < deadline:
        states = []
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                states.append((task / "stat").read_text().rsplit(")", 1)[1].split()[0])
            except FileNotFoundError:  # a thread that ended meanwhile
                continue
        if states and all(state == "T" for state in states):
            return
        time.sleep(0.001)
    raise AssertionError(f"pid {pid} did not stop within 30 s of SIGSTOP: thread states {states}")


def test_a_second_batch_is_refused_and_a_killed_holders_lock_is_taken_over(
    tmp_path: Path, tiny_checkpoint: Path
) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    rng = np.random.default_rng(3)
    for i in range(IMAGES):
        cv2.imwrite(str(inputs / f"f{i:02d}.png"), rng.integers(0, 255, (96, 128, 3), dtype=np.uint8))
    out = tmp_path / "out"
    first = subprocess.Popen(_command(inputs, out, tiny_checkpoint), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        owner = _wait_until_writing(first, out, 2)
        assert owner["pid"] == first.pid
        first.send_signal(signal.SIGSTOP)  # holds the lock, writes nothing more
        _wait_until_stopped(first.pid)  # the signal lands a moment later: a .tmp may be renamed meanwhile
        written = sorted(p.name for p in out.iterdir())

        second = subprocess.run(_command(inputs, out, tiny_checkpoint), capture_output=True, text=True, timeout=300)
        assert second.returncode == 2, second.stdout + second.stderr
        refusal = second.stderr.strip().splitlines()
        assert len(refusal) == 1 and f"pid {first.pid} on {os.uname().nodename}" in refusal[0], second.stderr
        assert "being written by another leanseg run" in refusal[0]
        assert sorted(p.name for p in out.iterdir()) == written  # the refused run touched nothing

        first.send_signal(signal.SIGKILL)
        first.communicate()
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    assert (out / LOCK_NAME).exists()  # left behind by the killed run

    third = subprocess.run(_command(inputs, out, tiny_checkpoint), capture_output=True, text=True, timeout=300)
    assert third.returncode == 0, third.stdout + third.stderr
    assert f"the run that left it (pid {first.pid} on {os.uname().nodename}" in third.stderr
    assert "0 failed" in third.stdout and "0 left" in third.stdout
    manifest = json.loads((out / "manifest.json").read_text())
    assert len(manifest["images"]) == IMAGES and all(r["status"] == "ok" for r in manifest["images"].values())
    assert not (out / LOCK_NAME).exists()  # released at the end
    for i in range(IMAGES):
        for kind in ("labels", "overlay"):
            assert cv2.imread(str(out / f"f{i:02d}_{kind}.png"), cv2.IMREAD_UNCHANGED) is not None


def test_a_job_another_run_disturbed_resumes_without_overwrite(tmp_path: Path, tiny_checkpoint: Path) -> None:
    """What two unlocked runs left behind (finding 4): images recorded as failed with 'already exists',
    their outputs written by the other run. Outputs a batch of this folder wrote stay ours to replace."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    rng = np.random.default_rng(4)
    for i in range(3):
        cv2.imwrite(str(inputs / f"g{i}.png"), rng.integers(0, 255, (64, 80, 3), dtype=np.uint8))
    out = tmp_path / "out"
    assert subprocess.run(_command(inputs, out, tiny_checkpoint), capture_output=True, timeout=300).returncode == 0
    with open(out / "manifest.journal.jsonl", "a") as journal:  # the other run's verdicts on two images
        for name in ("g0.png", "g1.png"):
            error = f"{inputs / name}: {out / name.replace('.png', '_labels.png')} already exists and was not " \
                    "written by this batch; pass --overwrite to replace it"
            journal.write(json.dumps({"record": {"source": name, "status": "error", "error": error}}) + "\n")
    for expected in ("2 segmented now, 1 finished before, 0 failed", "all 3 already done (resumed); nothing to run"):
        rerun = subprocess.run(_command(inputs, out, tiny_checkpoint), capture_output=True, text=True, timeout=300)
        assert rerun.returncode == 0, rerun.stdout + rerun.stderr
        assert expected in rerun.stdout
