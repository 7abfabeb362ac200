"""`leanseg batch --ray ADDRESS` on a real local Ray cluster: a head node and a worker node, each a
separate `ray start` process tree on loopback addresses. The outputs must equal the local batch's;
a run killed midway (SIGKILL of the driver) resumes like the local batch. Skipped without ray."""
from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

pytest.importorskip("ray", reason="the cluster extra is not installed (pip install 'leanseg[cluster]')")

from leanseg.core.cluster import LocalRayCluster, NodeSpec  # noqa: E402
from leanseg.core.jobs.batch import run_batch  # noqa: E402
from leanseg.core.jobs.batch_plan import BatchSettings  # noqa: E402
from leanseg.core.model import MobileUNet  # noqa: E402
from leanseg.core.model.checkpoint import default_info, load_checkpoint, save_checkpoint  # noqa: E402
from leanseg.core.predict import InferenceOptions, Segmenter  # noqa: E402

from .conftest import TINY_MOBILE  # noqa: E402
from .manifest_samples import recorded_ok  # noqa: E402

IMAGES = 40
BROKEN = "broken.png"  # one unreadable input: recorded as failed on both paths, never fatal
TIMING_COLUMNS = ("time_s", "peak_bytes")  # summary.csv columns that differ between any two runs, local or not
TIMING_FIELDS = ("seconds", "peak_bytes")  # the same, in manifest.json records


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalRayCluster]:
    with LocalRayCluster([NodeSpec(num_cpus=1), NodeSpec(num_cpus=1)]) as running:
        yield running


@pytest.fixture(scope="module")
def batch_inputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(input folder with 40 images and one broken file, tiny checkpoint)."""
    root = tmp_path_factory.mktemp("ray_batch")
    torch.manual_seed(0)
    checkpoint = save_checkpoint(root / "tiny.safetensors", MobileUNet(TINY_MOBILE).eval(), default_info(TINY_MOBILE))
    folder = root / "in"
    folder.mkdir()
    rng = np.random.default_rng(11)
    for i in range(IMAGES):
        cv2.imwrite(str(folder / f"img{i:02d}.png"), rng.integers(0, 255, (64, 96, 3), dtype=np.uint8))
    (folder / BROKEN).write_text("not a PNG")
    return folder, checkpoint


@pytest.fixture(scope="module")
def local_reference(batch_inputs: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The local batch's output folder (default engine, one thread, mirror averaging as the CLI's batch
    default), to compare the cluster's with."""
    folder, checkpoint = batch_inputs
    out = tmp_path_factory.mktemp("local") / "out"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        summary = run_batch(BatchSettings(folder, out, write_overlay=True),
                            Segmenter(load_checkpoint(checkpoint), InferenceOptions(device="cpu", mirror="flip")))
    finally:
        torch.set_num_threads(threads)
    assert len(summary.ok) == IMAGES and [r.source for r in summary.failed] == [BROKEN]
    return out


def _command(folder: Path, out: Path, checkpoint: Path, address: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "leanseg.core", "batch", str(folder), "--out", str(out), "--overlay",
            "--model", str(checkpoint), "--device", "cpu", "--ray", address, "--actors", "2", *extra]


def _without_timing(table: str) -> list[dict[str, str]]:
    return [{k: v for k, v in row.items() if k not in TIMING_COLUMNS} for row in csv.DictReader(io.StringIO(table))]


def _manifest_without_timing(path: Path) -> dict[str, object]:
    data = json.loads(path.read_text())
    for record in data["images"].values():
        for column in TIMING_FIELDS:
            record.pop(column)
    return data


def _assert_same_outputs(out: Path, reference: Path) -> None:
    """Same files; labels and overlays byte for byte; manifest and summary equal but for timings."""
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(p.name for p in reference.iterdir())
    for name in names:
        if name.endswith(".png"):
            assert (out / name).read_bytes() == (reference / name).read_bytes(), name
    assert _manifest_without_timing(out / "manifest.json") == _manifest_without_timing(reference / "manifest.json")
    assert _without_timing((out / "summary.csv").read_text()) == _without_timing(
        (reference / "summary.csv").read_text())


def test_cluster_batch_equals_the_local_batch(
    cluster: LocalRayCluster, batch_inputs: tuple[Path, Path], local_reference: Path, tmp_path: Path
) -> None:
    folder, checkpoint = batch_inputs
    out = tmp_path / "out"
    done = subprocess.run(_command(folder, out, checkpoint, cluster.address), capture_output=True, text=True,
                          timeout=300, env={**os.environ, **cluster.driver_env})
    assert done.returncode == 1, done.stdout + done.stderr  # 1: one input failed, the rest are segmented
    # two actors of one CPU each on two one-CPU nodes: one actor on the head, one on the worker node
    assert "2 node(s), 2 CPU(s), 0 GPU(s); 2 actor(s) x 1 thread(s)" in done.stderr, done.stdout + done.stderr
    assert f"{IMAGES} segmented now" in done.stdout and "1 failed" in done.stdout
    assert f"{folder / BROKEN}" in done.stderr  # the failing file is named
    _assert_same_outputs(out, local_reference)


def _wait_until_quiet(folder: Path, quiet_s: float = 3.0, limit_s: float = 60.0) -> None:
    """Ray stops a dead driver's actors within a few seconds: wait until nothing in `folder` changes."""
    def state() -> set[tuple[str, int, int]]:
        return {(p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir() if p.exists()}

    deadline = time.monotonic() + limit_s
    last, since = state(), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = state()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return
    raise AssertionError(f"{folder} kept changing for {limit_s} s after the driver was killed")


def _driver_once(cluster: LocalRayCluster, folder: Path, out: Path, checkpoint: Path, ready: Callable[[], bool]
                 ) -> tuple[subprocess.Popen[str], list[str], dict[str, str]]:
    """Start the batch driver (chunks of 2) and return it, its command and env once `ready()` holds."""
    command = _command(folder, out, checkpoint, cluster.address, "--ray-batch-size", "2")
    env = {**os.environ, **cluster.driver_env}
    driver = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 240
    while not ready():
        assert driver.poll() is None, driver.communicate()
        assert time.monotonic() < deadline, "the driver made no progress in 240 s"
        time.sleep(0.005)
    return driver, command, env


def test_cluster_batch_killed_midway_resumes(
    cluster: LocalRayCluster, batch_inputs: tuple[Path, Path], local_reference: Path, tmp_path: Path
) -> None:
    folder, checkpoint = batch_inputs
    out = tmp_path / "out"
    driver, command, env = _driver_once(cluster, folder, out, checkpoint,
                                        # the driver records an image after the actor wrote it: wait for both
                                        lambda: out.is_dir() and len(list(out.glob("*_labels.png"))) >= 6
                                        and len(recorded_ok(out)) >= 1)
    driver.send_signal(signal.SIGKILL)
    driver.communicate()
    _wait_until_quiet(out)
    finished = recorded_ok(out)
    assert 0 < len(finished) < IMAGES, "the kill must land mid-run"
    kept = {k: (out / k.replace(".png", "_labels.png")).stat() for k in finished}

    resumed = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert resumed.returncode == 1, resumed.stdout + resumed.stderr  # the broken input still fails
    assert f"{len(finished)} finished before" in resumed.stdout, resumed.stdout + resumed.stderr
    assert f"{IMAGES - len(finished)} segmented now" in resumed.stdout, resumed.stdout + resumed.stderr
    for key, stat in kept.items():  # finished before the kill: not redone
        after = (out / key.replace(".png", "_labels.png")).stat()
        assert (after.st_ino, after.st_mtime_ns) == (stat.st_ino, stat.st_mtime_ns), key
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp") or p.name.endswith(".jsonl")]
    _assert_same_outputs(out, local_reference)


def test_cluster_batch_ctrl_c_stops_at_once_and_resumes(
    cluster: LocalRayCluster, batch_inputs: tuple[Path, Path], local_reference: Path, tmp_path: Path
) -> None:
    folder, checkpoint = batch_inputs
    out = tmp_path / "out"
    driver, command, env = _driver_once(cluster, folder, out, checkpoint,
                                        lambda: out.is_dir() and len(recorded_ok(out)) >= 4)
    driver.send_signal(signal.SIGINT)  # on Ray, "after the current image" stops at once: chunks in flight are dropped
    stdout, stderr = driver.communicate(timeout=120)
    assert driver.returncode == 130, stdout + stderr
    assert "stopping after the current image" in stderr and "Traceback" not in stderr, stderr
    _wait_until_quiet(out)  # the actors were killed: nothing more is written
    assert not (out / "manifest.journal.jsonl").exists()  # closed: the snapshot holds every record
    finished = recorded_ok(out)
    assert 4 <= len(finished) < IMAGES, "the stop must land mid-run"

    resumed = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert resumed.returncode == 1, resumed.stdout + resumed.stderr
    assert f"{len(finished)} finished before" in resumed.stdout, resumed.stdout + resumed.stderr
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp") or p.name.endswith(".jsonl")]
    _assert_same_outputs(out, local_reference)
