"""`leanseg segment --memory-log` and `leanseg plot-memory`, end to end."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from leanseg.core.cli import main
from leanseg.core.commands.common import CommandError, check_memory_log, memory_logging
from leanseg.core.commands.plot_memory import thin_marks
from leanseg.core.events import JobEvent
from leanseg.core.memory import read_memory_csv
from leanseg.core.memory.log import SERIES, sidecar_path, write_memory_csv, written_as_memory_log

from .unwritable import make_unwritable


def test_segment_memory_log_then_plot_memory(tmp_path: Path, tiny_checkpoint: Path, rgb_image: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    log_path = tmp_path / "logs" / "memory.csv"
    done = subprocess.run([sys.executable, "-m", "leanseg.core", "segment", str(rgb_image), "--out",
                           str(tmp_path / "out"), "--model", str(tiny_checkpoint), "--device", "cpu",
                           "--memory-log", str(log_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"written to {log_path}" in done.stdout
    log = read_memory_csv(log_path)
    assert log.meta["device"] == "cpu" and log.series["time"].size >= 2
    labels = [label for _, label in log.marks]
    assert labels[0] == "start" and labels[-1] == "done" and "image 1/1" in labels
    assert (log.series["allocated"] > 0).all() and (log.series["peak"] >= log.series["allocated"]).all()

    png = tmp_path / "plot" / "memory.png"
    assert main(["plot-memory", str(log_path), "--out", str(png)]) == 0
    assert f"-> {png}" in capsys.readouterr().out
    pixels = cv2.imread(str(png))
    assert pixels is not None and pixels.shape == (540, 960, 3)


def _alone_in_a_folder(image: Path) -> Path:
    """`image` moved into a folder of its own, for `batch`."""
    folder = image.parent / "in"
    folder.mkdir()
    return image.rename(folder / image.name)


def _refused_before_the_model_loads(command: str, tmp_path: Path, image: Path, log: Path,
                                    out: Path | None = None) -> str:
    """Run `command` on `image` (batch: on its folder, which holds only it) with `--memory-log log` and a model
    that would fail to load; check it exits 2 with one line and writes nothing (no --out, no log; a log or
    sidecar that was there before is unchanged); returns it."""
    there = {path: path.read_bytes() for path in (log, sidecar_path(log)) if path.is_file()}
    model = tmp_path / "broken.safetensors"
    model.write_bytes(b"not a model")  # would fail to load: the memory-log error must come first
    out = out or tmp_path / "out"
    source = image.parent if command == "batch" else image
    assert command != "batch" or list(source.iterdir()) == [image]
    result = subprocess.run([sys.executable, "-m", "leanseg.core", command, str(source), "--out", str(out),
                             "--model", str(model), "--memory-log", str(log)], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stdout + result.stderr
    assert "broken.safetensors" not in result.stderr and not result.stdout
    assert not out.exists()
    assert {path: path.read_bytes() for path in (log, sidecar_path(log)) if path.is_file()} == there
    return result.stderr


@pytest.mark.parametrize("command", ["segment", "batch"])
def test_a_memory_log_replaces_only_an_earlier_memory_log(command: str, tmp_path: Path, rgb_image: Path) -> None:
    """Not an input image, not a model's card where its JSON sidecar would go, not any other file: each is
    refused before the work and left as it was; a log's name must end in .csv."""
    image = _alone_in_a_folder(rgb_image)
    assert _refused_before_the_model_loads(command, tmp_path, image, image) == (
        f"leanseg: error: --memory-log {image}: a memory log is a CSV file; give a name ending in .csv, such as "
        f"{image.stem}.csv\n")
    card = tmp_path / "mynet.json"
    card.write_text('{"card_version": 1}\n')
    assert _refused_before_the_model_loads(command, tmp_path, image, tmp_path / "mynet.csv") == (
        f"leanseg: error: --memory-log {tmp_path / 'mynet.csv'}: its JSON sidecar {card} already exists and is not "
        "a leanseg memory log, so it is not replaced; choose another name\n")
    table = tmp_path / "table.csv"
    table.write_text("name,value\na,1\n")
    assert _refused_before_the_model_loads(command, tmp_path, image, table) == (
        f"leanseg: error: --memory-log {table}: it already exists and is not a leanseg memory log, so it is not "
        "replaced; choose another name\n")
    earlier = tmp_path / "earlier.csv"
    write_memory_csv(earlier, {"time": np.zeros(1), **{name: np.zeros(1) for name in SERIES}}, [], {})
    assert written_as_memory_log(earlier) and written_as_memory_log(sidecar_path(earlier))
    assert not written_as_memory_log(card) and not written_as_memory_log(table) and not written_as_memory_log(image)
    check_memory_log(earlier)  # an earlier log (and its sidecar) may be replaced: no error


def test_a_batch_memory_log_never_lands_on_the_batch_own_files(tmp_path: Path, rgb_image: Path) -> None:
    image = _alone_in_a_folder(rgb_image)
    out = tmp_path / "results"
    assert _refused_before_the_model_loads("batch", tmp_path, image, out / "summary.csv", out) == (
        f"leanseg: error: --memory-log {out / 'summary.csv'}: it would replace the batch's summary.csv; choose "
        "another name\n")
    assert _refused_before_the_model_loads("batch", tmp_path, image, out / "manifest.csv", out) == (
        f"leanseg: error: --memory-log {out / 'manifest.csv'}: its JSON sidecar {out / 'manifest.json'} would "
        "replace the batch's manifest.json; choose another name\n")


@pytest.mark.parametrize("command", ["segment", "batch"])
def test_a_memory_log_that_cannot_be_written_is_refused_before_the_work(command: str, tmp_path: Path,
                                                                        rgb_image: Path) -> None:
    """Not at the end, after every image, naming its JSON sidecar: up front, named as given (a file in the way,
    which fails for everyone; the log or its sidecar a folder)."""
    image = _alone_in_a_folder(rgb_image)
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine\n")
    log = a_file / "memory.csv"
    assert _refused_before_the_model_loads(command, tmp_path, image, log) == (
        f"leanseg: error: --memory-log {log}: {a_file}: cannot write the output folder (it is a file; give a folder)\n")
    assert a_file.read_text() == "mine\n"
    folder = tmp_path / "logs"
    folder.mkdir()
    assert _refused_before_the_model_loads(command, tmp_path, image, folder) == (
        f"leanseg: error: --memory-log {folder} is a folder; give a file name such as {folder / 'memory.csv'}\n")
    (folder / "memory.json").mkdir()
    assert _refused_before_the_model_loads(command, tmp_path, image, folder / "memory.csv") == (
        f"leanseg: error: --memory-log {folder / 'memory.csv'}: its JSON sidecar {folder / 'memory.json'} is a "
        "folder; move it or choose another name\n")


@pytest.mark.parametrize("command", ["segment", "batch"])
def test_a_memory_log_in_a_read_only_folder_is_refused_before_the_work(command: str, tmp_path: Path,
                                                                       rgb_image: Path) -> None:
    image = _alone_in_a_folder(rgb_image)
    locked = tmp_path / "locked"  # a folder no file can be made in, even by root (not just its permission bits)
    locked.mkdir()
    undo = make_unwritable(locked)
    try:
        refused = _refused_before_the_model_loads(command, tmp_path, image, locked / "memory.csv")
    finally:
        undo()
    assert refused.startswith(f"leanseg: error: --memory-log {locked / 'memory.csv'}: {locked}: cannot write the "
                              "output folder (")
    assert not any(locked.iterdir())


def test_plot_memory_errors_name_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plot-memory", str(tmp_path / "missing.csv"), "--out", str(tmp_path / "x.png")]) == 2
    assert "missing.csv: no such file" in capsys.readouterr().err
    other = tmp_path / "other.csv"
    other.write_text("name,value\na,1\n")
    assert main(["plot-memory", str(other), "--out", str(tmp_path / "x.png")]) == 2
    assert "other.csv: not a leanseg memory log" in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()


def test_memory_logging_marks_events_passes_them_on_and_writes_on_error(tmp_path: Path) -> None:
    seen: list[JobEvent] = []
    path = tmp_path / "memory.csv"
    with pytest.raises(RuntimeError, match="job failed"):
        with memory_logging(path, torch.device("cpu"), seen.append) as on_event:
            on_event(JobEvent("start"))
            on_event(JobEvent("plan", message="2 tiles"))
            on_event(JobEvent("tile", index=0, count=2))
            raise RuntimeError("job failed")
    assert [event.kind for event in seen] == ["start", "plan", "tile"]
    log = read_memory_csv(path)
    assert [label for _, label in log.marks] == ["start", "tile 1/2"]
    assert log.series["time"].size >= 2  # the first sample and the closing one


def test_memory_logging_without_a_path_is_a_pass_through(tmp_path: Path) -> None:
    seen: list[JobEvent] = []
    with memory_logging(None, torch.device("cpu"), seen.append) as on_event:
        assert on_event == seen.append
    with pytest.raises(CommandError, match="is a folder"):
        with memory_logging(tmp_path, torch.device("cpu"), seen.append):
            pass


def test_thin_marks_keeps_job_boundaries() -> None:
    marks = [(0.0, "start")] + [(float(i), f"tile {i}/500") for i in range(1, 501)] + [(501.0, "done")]
    thinned = thin_marks(marks, limit=30)
    assert len(thinned) <= 30 and thinned[0] == (0.0, "start") and thinned[-1] == (501.0, "done")
    assert np.all(np.diff([t for t, _ in thinned]) > 0)


def test_plot_memory_writes_svg_by_suffix_or_format_in_a_real_process(tmp_path: Path) -> None:
    from leanseg.core.memory import write_memory_csv

    times = np.linspace(0.0, 2.0, 21)
    series = {"time": times, **{key: (1 + times * 10) * 1e6 for key in ("allocated", "reserved", "peak", "rss")},
              "engine_live": np.zeros_like(times)}
    log = write_memory_csv(tmp_path / "memory.csv", series, [(0.5, "start"), (1.5, "done")],
                           {"device": "cpu", "source": "glibc", "rate_hz": 10.0})

    def plot(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "leanseg.core", "plot-memory", str(log), *args],
                              capture_output=True, text=True, timeout=120)

    done = plot("--out", str(tmp_path / "by_suffix.svg"))
    assert done.returncode == 0, done.stderr
    svg = (tmp_path / "by_suffix.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "memory on cpu (source: glibc)" in svg and "done" in svg
    done = plot("--out", str(tmp_path / "chart"), "--format", "svg")
    assert done.returncode == 0 and (tmp_path / "chart.svg").is_file()
    done = plot("--out", str(tmp_path / "x.png"), "--format", "svg")
    assert done.returncode == 2 and "ends in .png but --format is svg" in done.stderr
    done = plot("--out", str(tmp_path / "x.jpg"))
    assert done.returncode == 2 and "x.jpg: cannot tell the chart type from .jpg" in done.stderr
    done = plot("--out", str(tmp_path / "plain"))  # no suffix, no --format: a PNG, named so
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "plain.png").read_bytes().startswith(b"\x89PNG") and not (tmp_path / "plain").exists()


@pytest.mark.parametrize("suffix", ["png", "svg", "pdf"])
def test_plot_memory_replaces_its_own_chart_and_nothing_else(suffix: str, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "memory.csv"
    write_memory_csv(log, {"time": np.arange(3.0), **{name: np.arange(3) for name in SERIES}}, [(1.0, "start")], {})
    chart = tmp_path / f"memory.{suffix}"
    for _ in range(2):  # a rerun replaces the chart it drew
        assert main(["plot-memory", str(log), "--out", str(chart)]) == 0
    photo = tmp_path / f"photo.{suffix}"
    photo.write_bytes(b"the user's own file")
    assert main(["plot-memory", str(log), "--out", str(photo)]) == 2
    assert capsys.readouterr().err == (f"leanseg: error: {photo}: already exists and is not a chart leanseg drew, "
                                       "so it is not replaced; choose another --out\n")
    assert photo.read_bytes() == b"the user's own file"
