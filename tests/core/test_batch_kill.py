"""`leanseg batch` as a real subprocess: SIGKILL mid-run then resume; Ctrl-C (SIGINT) stops cleanly."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

from .manifest_samples import recorded_ok

IMAGES = 30


@pytest.fixture
def image_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "in"
    folder.mkdir()
    rng = np.random.default_rng(7)
    for i in range(IMAGES):
        cv2.imwrite(str(folder / f"frame{i:03d}.png"), rng.integers(0, 255, (160, 224, 3), dtype=np.uint8))
    return folder


def _command(in_dir: Path, out_dir: Path, checkpoint: Path) -> list[str]:
    return [sys.executable, "-m", "leanseg.core", "batch", str(in_dir), "--out", str(out_dir), "--overlay",
            "--model", str(checkpoint), "--device", "cpu", "--threads", "1", "--engine", "eager"]  # fast on tiny models


def _start_and_wait_for(command: list[str], out_dir: Path, labels_written: int) -> subprocess.Popen[str]:
    """Start the batch and return once `labels_written` labels PNGs exist (it is still running)."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if out_dir.is_dir() and len(list(out_dir.glob("*_labels.png"))) >= labels_written:
            return process
        if process.poll() is not None:
            break
        time.sleep(0.005)
    process.kill()
    out, err = process.communicate()
    raise AssertionError(f"the batch ended (rc {process.returncode}) before {labels_written} outputs: {out}{err}")


def _decoded(path: Path) -> np.ndarray:
    pixels = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    assert pixels is not None, f"{path} does not decode"
    return pixels


def _expected_names() -> set[str]:
    stems = [f"frame{i:03d}" for i in range(IMAGES)]
    return {f"{s}_{kind}.png" for s in stems for kind in ("labels", "overlay")} | {"manifest.json", "summary.csv"}


def test_sigkill_mid_run_then_resume_matches_an_uninterrupted_run(
    tmp_path: Path, image_folder: Path, tiny_checkpoint: Path
) -> None:
    killed_out = tmp_path / "killed"
    process = _start_and_wait_for(_command(image_folder, killed_out, tiny_checkpoint), killed_out, 4)
    process.send_signal(signal.SIGKILL)
    process.communicate()
    assert process.returncode == -signal.SIGKILL
    finished_at_kill = recorded_ok(killed_out)
    assert 0 < len(finished_at_kill) < IMAGES, "the kill must land mid-run"
    kept = {}
    for source in finished_at_kill:
        for kind in ("labels", "overlay"):
            stat = (killed_out / source.replace(".png", f"_{kind}.png")).stat()
            kept[(source, kind)] = (stat.st_ino, stat.st_mtime_ns)

    reference_out = tmp_path / "reference"  # an uninterrupted run, side by side with the resume
    reference = subprocess.Popen(_command(image_folder, reference_out, tiny_checkpoint), stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
    rerun = subprocess.run(_command(image_folder, killed_out, tiny_checkpoint), capture_output=True, text=True,
                           timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert f"{len(finished_at_kill)} finished before" in rerun.stdout
    assert f"{IMAGES - len(finished_at_kill)} segmented now" in rerun.stdout
    assert reference.wait(timeout=300) == 0, reference.communicate()[1]

    # every output exactly once, nothing half-written or left over, and equal to the uninterrupted run
    names = sorted(p.name for p in killed_out.iterdir())
    assert len(names) == len(set(names)) and set(names) == _expected_names()
    for name in _expected_names() - {"manifest.json", "summary.csv"}:
        np.testing.assert_array_equal(_decoded(killed_out / name), _decoded(reference_out / name), err_msg=name)
    # nothing finished before the kill was redone: same files, untouched
    for (source, kind), identity in kept.items():
        stat = (killed_out / source.replace(".png", f"_{kind}.png")).stat()
        assert (stat.st_ino, stat.st_mtime_ns) == identity, f"{source} {kind} was rewritten"
    manifest = json.loads((killed_out / "manifest.json").read_text())
    assert len(manifest["images"]) == IMAGES and not manifest["pending"]
    assert all(r["status"] == "ok" for r in manifest["images"].values())
    rows = (killed_out / "summary.csv").read_text().splitlines()
    assert len(rows) == IMAGES + 1 and all(row.endswith(",ok,,") for row in rows[1:])  # status ok, no error, no note
    assert sorted(p.name for p in image_folder.iterdir()) == [f"frame{i:03d}.png" for i in range(IMAGES)]


def test_ctrl_c_stops_after_the_current_image_and_resume_finishes(
    tmp_path: Path, image_folder: Path, tiny_checkpoint: Path
) -> None:
    out = tmp_path / "out"
    process = _start_and_wait_for(_command(image_folder, out, tiny_checkpoint), out, 3)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stdout + stderr
    assert "stopping after the current image" in stderr and "stopped early" in stdout
    finished = recorded_ok(out)
    assert 3 <= len(finished) < IMAGES
    assert not (out / "manifest.journal.jsonl").exists()  # closed cleanly: all in manifest.json
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]
    for source in finished:
        assert _decoded(out / source.replace(".png", "_labels.png")).shape == (160, 224)

    resumed = subprocess.run(_command(image_folder, out, tiny_checkpoint), capture_output=True, text=True,
                             timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{len(finished)} finished before" in resumed.stdout
    assert {p.name for p in out.iterdir()} == _expected_names()


def test_ctrl_c_after_the_batch_is_over_leaves_its_exit_code_alone() -> None:
    """Real SIGINTs to this process: the first two stop the batch (after the image, then at once); once the batch
    is over, another is ignored, so a Ctrl-C while the summary prints cannot make a finished batch exit 130."""
    from leanseg.core.commands.batch import CTRL_C_NOTES
    from leanseg.core.commands.common import CtrlC

    notes: list[str] = []
    before = signal.getsignal(signal.SIGINT)
    with CtrlC(CTRL_C_NOTES, notes.append) as ctrl_c:
        stop, cancel = ctrl_c.pressed
        signal.raise_signal(signal.SIGINT)
        assert stop.is_set() and not cancel.is_set()
        ctrl_c.over()
        signal.raise_signal(signal.SIGINT)  # the default handler would raise KeyboardInterrupt here
        assert not cancel.is_set()
        assert notes == ["stopping after the current image (Ctrl-C again to stop at once)"]
    assert signal.getsignal(signal.SIGINT) is before
    with CtrlC(CTRL_C_NOTES, notes.append) as ctrl_c, pytest.raises(KeyboardInterrupt):
        for _ in range(3):
            signal.raise_signal(signal.SIGINT)
    assert ctrl_c.pressed[1].is_set() and signal.getsignal(signal.SIGINT) is before
