"""The batch job in-process: bad inputs, outputs, resume, damaged outputs, foreign files, cancel."""
from __future__ import annotations

import csv
import json
import re
import threading
from pathlib import Path

import cv2
import numpy as np
import pytest
import tifffile
import torch

from leanseg.core.events import JobEvent
from leanseg.core.io.images import read_image
from leanseg.core.io.outputs import OutputPathError
from leanseg.core.io.pixel_range import READING_RULES
from leanseg.core.jobs.batch import model_fingerprint, run_batch
from leanseg.core.jobs.batch_image import process_image
from leanseg.core.jobs.batch_plan import BatchSettings, left_out_note, plan_batch
from leanseg.core.jobs.manifest import Manifest, ManifestError
from leanseg.core.model.checkpoint import load_checkpoint
from leanseg.core.predict import InferenceOptions, Segmenter

from .test_images import exif_jpeg
from .unwritable import make_unwritable


@pytest.fixture(autouse=True)
def one_thread() -> object:
    """Tiny models on a shared machine: one thread avoids oversubscription stalls."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _segmenter(checkpoint: Path, want_probs: bool = False, engine: str = "eager") -> Segmenter:
    """Eager by default (fastest on tiny models); the bad-inputs test runs the default lean engine."""
    return Segmenter(load_checkpoint(checkpoint), InferenceOptions(device="cpu", engine=engine,
                                                                   want_probs=want_probs))


def _write_images(folder: Path, count: int, seed: int = 0) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(count):
        path = folder / f"img{i:02d}.png"
        cv2.imwrite(str(path), rng.integers(0, 255, (40, 56, 3), dtype=np.uint8))
        paths.append(path)
    return paths


def _snapshot(folder: Path) -> dict[str, tuple[int, int, bytes]]:
    """name -> (inode, mtime_ns, bytes) of every file under folder."""
    return {p.relative_to(folder).as_posix(): (p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes())
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_bad_inputs_are_recorded_and_skipped_the_rest_segmented(tmp_path: Path, tiny_checkpoint: Path) -> None:
    inputs = tmp_path / "in"
    good = _write_images(inputs, 2)
    (inputs / "truncated.png").write_bytes(good[0].read_bytes()[:200])
    (inputs / "notes.jpg").write_text("this is text, not a JPEG")
    (inputs / "empty.png").write_bytes(b"")
    tifffile.imwrite(inputs / "deep.tif", np.random.default_rng(1).integers(0, 65535, (40, 56), dtype=np.uint16))
    cv2.imwrite(str(inputs / "alpha.png"), np.random.default_rng(2).integers(0, 255, (40, 56, 4), dtype=np.uint8))
    before = _snapshot(inputs)
    events: list[JobEvent] = []
    segmenter = _segmenter(tiny_checkpoint, engine=InferenceOptions.engine)
    summary = run_batch(BatchSettings(inputs, tmp_path / "out", write_overlay=True), segmenter,
                        on_event=events.append)

    assert not summary.all_ok and not summary.cancelled and summary.remaining == 0
    errors = {Path(r.source).name: r.error for r in summary.failed}
    assert set(errors) == {"truncated.png", "notes.jpg", "empty.png"}
    assert "truncated PNG" in errors["truncated.png"] and str(inputs / "truncated.png") in errors["truncated.png"]
    assert "not an image" in errors["notes.jpg"]
    assert "empty (0 bytes)" in errors["empty.png"]
    assert sorted(r.source for r in summary.ok) == ["alpha.png", "deep.tif", "img00.png", "img01.png"]
    for name in ("alpha", "deep", "img00", "img01"):
        labels = cv2.imread(str(tmp_path / "out" / f"{name}_labels.png"), cv2.IMREAD_UNCHANGED)
        assert labels.shape == (40, 56) and labels.dtype == np.uint8 and labels.max() < 4
        assert read_image(tmp_path / "out" / f"{name}_overlay.png").pixels.shape == (40, 56, 3)
    assert _snapshot(inputs) == before  # inputs untouched

    rows = (tmp_path / "out" / "summary.csv").read_text().splitlines()
    assert rows[0].startswith("file,width_px,height_px,time_s,peak_bytes,fraction class 0")
    assert len(rows) == 8 and any(r.startswith("empty.png,") and "error" in r for r in rows)
    ok_row = next(r for r in rows if r.startswith("deep.tif,")).split(",")
    assert ok_row[1:3] == ["56", "40"] and abs(sum(float(x) for x in ok_row[5:9]) - 1.0) < 1e-4
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["images"]["img00.png"]["outputs"]["labels"]["path"] == "img00_labels.png"
    assert not (tmp_path / "out" / "manifest.journal.jsonl").exists()
    assert [e.kind for e in events][0] == "start" and events[-1].kind == "done"
    assert sum(e.kind == "error" for e in events) == 3 and sum(e.kind == "image" for e in events) == 4
    assert [e.message for e in events if e.data.get("alpha_ignored")] == [  # said once, for the transparent one
        "alpha.png: alpha channel ignored: transparent pixels are segmented with their stored colour"]


def test_resume_skips_finished_and_redoes_damaged_or_missing(tmp_path: Path, tiny_checkpoint: Path) -> None:
    inputs = tmp_path / "in"
    _write_images(inputs, 6)
    out = tmp_path / "out"
    settings = BatchSettings(inputs, out, write_overlay=True)
    segmenter = _segmenter(tiny_checkpoint)
    assert run_batch(settings, segmenter).all_ok
    reference = _snapshot(out)
    damaged = out / "img01_labels.png"
    damaged.write_bytes(damaged.read_bytes()[:20])
    (out / "img03_overlay.png").unlink()

    events: list[JobEvent] = []
    summary = run_batch(settings, segmenter, on_event=events.append)
    assert summary.all_ok and summary.finished_before == 4
    assert sorted(r.source for r in summary.records) == ["img01.png", "img03.png"]
    warnings = [e.message for e in events if e.kind == "warning"]
    assert f"{out / 'img03_overlay.png'}: missing; redoing img03.png" in warnings, warnings
    assert f"{damaged}: 20 bytes, " in " ".join(warnings)
    after = _snapshot(out)
    for name in ("img00_labels.png", "img02_overlay.png", "img05_labels.png"):
        assert after[name] == reference[name]  # not rewritten: same inode, mtime, bytes
    assert after["img01_labels.png"][2] == reference["img01_labels.png"][2]
    assert after["img03_overlay.png"][2] == reference["img03_overlay.png"][2]

    third = run_batch(settings, segmenter)  # nothing left to do
    assert third.all_ok and third.records == [] and third.finished_before == 6


def test_existing_foreign_outputs_are_never_replaced_without_overwrite(tmp_path: Path, tiny_checkpoint: Path) -> None:
    inputs = tmp_path / "in"
    _write_images(inputs, 2)
    out = tmp_path / "out"
    out.mkdir()
    (out / "img00_labels.png").write_bytes(b"somebody else's file")
    segmenter = _segmenter(tiny_checkpoint)
    summary = run_batch(BatchSettings(inputs, out), segmenter)
    assert [r.source for r in summary.failed] == ["img00.png"]
    assert "already exists" in summary.failed[0].error and "--overwrite" in summary.failed[0].error
    assert (out / "img00_labels.png").read_bytes() == b"somebody else's file"

    summary = run_batch(BatchSettings(inputs, out, overwrite=True), segmenter)
    assert summary.all_ok and len(summary.records) == 2
    assert cv2.imread(str(out / "img00_labels.png"), cv2.IMREAD_UNCHANGED).shape == (40, 56)


def test_recursive_mirrors_subfolders_and_skips_an_output_folder_inside_the_input(
    tmp_path: Path, tiny_checkpoint: Path
) -> None:
    inputs = tmp_path / "in"
    _write_images(inputs, 1)
    _write_images(inputs / "day" / "a", 1, seed=3)
    cv2.imwrite(str(inputs / "img00.jpg"), np.zeros((40, 56, 3), np.uint8))  # same stem, other extension
    out = inputs / "results"
    segmenter = _segmenter(tiny_checkpoint)
    summary = run_batch(BatchSettings(inputs, out, recursive=True), segmenter)
    assert summary.all_ok and summary.total == 3
    assert {p.relative_to(out).as_posix() for p in out.rglob("*_labels.png")} == {
        "img00_png_labels.png", "img00_jpg_labels.png", "day/a/img00_labels.png"}
    again = run_batch(BatchSettings(inputs, out, recursive=True), segmenter)  # outputs are not inputs
    assert again.total == 3 and again.finished_before == 3
    elsewhere = run_batch(BatchSettings(inputs, tmp_path / "second", recursive=True), segmenter)
    assert elsewhere.total == 3  # the first run's output folder (it holds a manifest) is not read as input
    with pytest.raises(ValueError, match="is the input folder"):
        BatchSettings(inputs, inputs)


def test_stop_after_current_then_resume_finishes_the_rest(tmp_path: Path, tiny_checkpoint: Path) -> None:
    inputs = tmp_path / "in"
    _write_images(inputs, 6)
    out = tmp_path / "out"
    stop = threading.Event()

    def stop_after_two(event: JobEvent) -> None:
        if event.kind == "image" and event.index == 1:
            stop.set()

    segmenter = _segmenter(tiny_checkpoint)
    first = run_batch(BatchSettings(inputs, out), segmenter, stop_after_current=stop, on_event=stop_after_two)
    assert first.cancelled and not first.all_ok and 2 <= len(first.records) < 6
    assert not list(out.glob(".*.tmp"))
    second = run_batch(BatchSettings(inputs, out), segmenter)
    assert second.all_ok and second.finished_before == len(first.records)
    assert len(second.records) == 6 - len(first.records)


def test_cancel_before_start_writes_nothing(tmp_path: Path, tiny_checkpoint: Path) -> None:
    inputs = tmp_path / "in"
    _write_images(inputs, 3)
    cancel = threading.Event()
    cancel.set()
    summary = run_batch(BatchSettings(inputs, tmp_path / "out"), _segmenter(tiny_checkpoint), cancel=cancel)
    assert summary.cancelled and summary.records == [] and summary.remaining == 3
    assert not list((tmp_path / "out").glob("*_labels.png"))


def test_probs_are_written_and_sum_to_one(tmp_path: Path, tiny_checkpoint: Path) -> None:
    inputs = tmp_path / "in"
    _write_images(inputs, 1)
    summary = run_batch(BatchSettings(inputs, tmp_path / "out", write_probs=True),
                        _segmenter(tiny_checkpoint, want_probs=True))
    assert summary.all_ok
    probs = np.load(tmp_path / "out" / "img00_probs.npy")
    assert probs.shape == (4, 40, 56) and probs.dtype == np.float16
    np.testing.assert_allclose(probs.astype(np.float32).sum(0), 1.0, atol=5e-3)
    with pytest.raises(ValueError, match="want_probs"):
        run_batch(BatchSettings(inputs, tmp_path / "o2", write_probs=True), _segmenter(tiny_checkpoint))


def test_another_models_results_are_refused(tmp_path: Path, tiny_checkpoint: Path) -> None:
    inputs = tmp_path / "in"
    _write_images(inputs, 1)
    out = tmp_path / "out"
    run_batch(BatchSettings(inputs, out), _segmenter(tiny_checkpoint))
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["fingerprint"]["sha256"] = "0" * 64
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ManifestError, match="--overwrite"):
        run_batch(BatchSettings(inputs, out), _segmenter(tiny_checkpoint))
    with pytest.raises(ManifestError, match=r"made with model .* \(sha256 000000000000\), outputs labels, not model "
                                            r".*, outputs labels, overlay \(--alpha 0\.5\); pass --overwrite"):
        run_batch(BatchSettings(inputs, out, write_overlay=True), _segmenter(tiny_checkpoint))  # not only outputs


def test_results_read_by_other_pixel_rules_are_refused_and_a_manifest_before_them_resumes(
        tmp_path: Path, tiny_checkpoint: Path) -> None:
    """The rules that read a 16-bit or float file as the model's 0..1 are versioned: a resume after they change
    would mix two readings of the same kind of file in one folder."""
    inputs, out = tmp_path / "in", tmp_path / "out"
    _write_images(inputs, 2)
    run_batch(BatchSettings(inputs, out), _segmenter(tiny_checkpoint))
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["fingerprint"]["reading"] == READING_RULES
    (out / "img01_labels.png").unlink()  # left to redo
    before = _snapshot(out)
    (out / "manifest.json").write_text(json.dumps({**manifest, "fingerprint": {**manifest["fingerprint"],
                                                                               "reading": "1"}}))
    with pytest.raises(ManifestError, match=rf"made with pixel reading rules 1, not pixel reading rules "
                                            rf"{READING_RULES}; pass --overwrite"):
        run_batch(BatchSettings(inputs, out), _segmenter(tiny_checkpoint))
    assert not (out / "img01_labels.png").exists()
    del manifest["fingerprint"]["reading"]  # a manifest written before the rules were versioned
    (out / "manifest.json").write_text(json.dumps(manifest))
    summary = run_batch(BatchSettings(inputs, out), _segmenter(tiny_checkpoint))
    assert (summary.finished_before, len(summary.ok)) == (1, 1)
    assert (out / "img01_labels.png").exists() and _snapshot(out)["img00_labels.png"] == before["img00_labels.png"]


def test_stale_temp_files_and_torn_journal_lines_are_cleaned_up(tmp_path: Path, tiny_checkpoint: Path) -> None:
    inputs = tmp_path / "in"
    _write_images(inputs, 2)
    out = tmp_path / "out"
    out.mkdir()
    (out / ".img00_labels.png.ab12cd34.tmp").write_bytes(b"half")
    (out / ".notes.txt.ab12cd34.tmp").write_bytes(b"not ours")
    (out / "manifest.journal.jsonl").write_text('{"record": {"source": "img0')  # torn by a kill
    summary = run_batch(BatchSettings(inputs, out), _segmenter(tiny_checkpoint))
    assert summary.all_ok and len(summary.records) == 2
    assert not (out / ".img00_labels.png.ab12cd34.tmp").exists()
    assert (out / ".notes.txt.ab12cd34.tmp").exists()


def test_per_image_steps_run_elsewhere_match_run_batch_and_resume(tmp_path: Path, tiny_checkpoint: Path) -> None:
    """The cluster pattern: plan on the driver, `process_image` per task without a manifest, record on the driver."""
    inputs = tmp_path / "in"
    _write_images(inputs, 3)
    (inputs / "bad.png").write_bytes(b"")
    segmenter = _segmenter(tiny_checkpoint)
    run_batch(BatchSettings(inputs, tmp_path / "local"), segmenter)

    settings = BatchSettings(inputs, tmp_path / "remote")
    manifest = Manifest.open(settings.out_dir, model_fingerprint(segmenter), segmenter.info.class_names)
    tasks = plan_batch(settings, manifest).tasks
    for task in tasks:
        manifest.begin(task.key, list(task.outputs.values()))
    for record in [process_image(task, segmenter) for task in tasks]:
        manifest.finish(record)
    manifest.close()
    for name in ("img00_labels.png", "img01_labels.png", "img02_labels.png"):
        assert (tmp_path / "remote" / name).read_bytes() == (tmp_path / "local" / name).read_bytes()
    again = run_batch(settings, segmenter)
    assert again.finished_before == 3 and [r.source for r in again.records] == ["bad.png"]


def test_an_input_folder_without_images_is_refused_and_nothing_is_created(tmp_path: Path,
                                                                          tiny_checkpoint: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "readme.md").write_text("no images here")
    _write_images(inputs / "day", 1)  # only with recursive
    out = tmp_path / "out"
    segmenter = _segmenter(tiny_checkpoint)
    with pytest.raises(ValueError, match=r"no images in .*\(looked for \.png.*found 1 file that is not an image: "
                                         r"readme\.md; pass --recursive"):
        run_batch(BatchSettings(inputs, out), segmenter)
    assert not out.exists()
    summary = run_batch(BatchSettings(inputs, out, recursive=True), segmenter)
    assert summary.all_ok and summary.total == 1 and summary.left_out == ["readme.md"]


def test_files_that_are_not_images_are_left_out_and_listed(tmp_path: Path, tiny_checkpoint: Path) -> None:
    inputs = tmp_path / "in"
    _write_images(inputs, 1)
    for name in ("notes.txt", "clip.mp4", "scan.PDF", ".DS_Store"):
        (inputs / name).write_text("x")
    events: list[JobEvent] = []
    summary = run_batch(BatchSettings(inputs, tmp_path / "out"), _segmenter(tiny_checkpoint), on_event=events.append)
    assert summary.all_ok and summary.total == 1
    assert summary.left_out == ["clip.mp4", "notes.txt", "scan.PDF"]  # hidden files are not counted
    assert events[0].kind == "start" and events[0].data["left_out"] == summary.left_out
    assert left_out_note(summary.left_out) == "left out 3 files that are not images: clip.mp4, notes.txt, scan.PDF"
    many = [f"f{i}.txt" for i in range(8)]
    assert left_out_note(many) == "left out 8 files that are not images: f0.txt, f1.txt, f2.txt, f3.txt, f4.txt " \
                                  "and 3 more"


def test_resume_with_other_output_options_is_refused(tmp_path: Path, tiny_checkpoint: Path) -> None:
    inputs = tmp_path / "in"
    _write_images(inputs, 2)
    out = tmp_path / "out"
    segmenter = _segmenter(tiny_checkpoint, want_probs=True)
    assert run_batch(BatchSettings(inputs, out, write_overlay=True), segmenter).all_ok
    for settings, made in ((BatchSettings(inputs, out, write_overlay=True, overlay_alpha=0.8), "with --alpha 0.5"),
                           (BatchSettings(inputs, out, write_overlay=True, write_probs=True), "without --probs"),
                           (BatchSettings(inputs, out), "with --overlay --alpha 0.5")):
        with pytest.raises(ManifestError, match=re.escape(f"{out} holds results made {made}; rerun {made}, pass "
                                                          "--overwrite to redo them, or choose another output folder")):
            run_batch(settings, segmenter)
    same = run_batch(BatchSettings(inputs, out, write_overlay=True), segmenter)
    assert same.all_ok and same.finished_before == 2

    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["fingerprint"]["outputs"] == {"kinds": ["labels", "overlay"], "overlay_alpha": 0.5}
    with_probs = {**manifest, "fingerprint": {**manifest["fingerprint"], "outputs": {
        "kinds": ["labels", "probs"]}}}  # results made with --no-overlay --probs, resumed with the overlay on
    (out / "manifest.json").write_text(json.dumps(with_probs))
    with pytest.raises(ManifestError, match="made with --no-overlay and with --probs; rerun with --no-overlay and "
                                            "with --probs, pass --overwrite"):
        run_batch(BatchSettings(inputs, out, write_overlay=True), segmenter)
    (out / "manifest.json").write_text(json.dumps(manifest))
    del manifest["fingerprint"]["outputs"]  # a manifest written before output options were recorded
    (out / "manifest.json").write_text(json.dumps(manifest))
    older = run_batch(BatchSettings(inputs, out, write_overlay=True), segmenter)
    assert older.all_ok and older.finished_before == 2


def test_each_images_note_is_said_and_kept_in_its_record(tmp_path: Path, tiny_checkpoint: Path) -> None:
    """What reading did to an image (a z-stack's first page, an EXIF rotation, an alpha ignored), as `segment`
    says it: an info event per image, and the image's record (manifest.json) and its row in the app."""
    inputs = tmp_path / "in"
    _write_images(inputs, 1)
    stack = np.stack([np.full((40, 56), v, np.uint8) for v in (10, 20, 30)])
    tifffile.imwrite(inputs / "stack.tif", stack, photometric="minisblack")
    (inputs / "turned.jpg").write_bytes(exif_jpeg(np.zeros((40, 56, 3), np.uint8), 6))
    cv2.imwrite(str(inputs / "alpha.png"), np.zeros((40, 56, 4), np.uint8))  # transparent everywhere
    events: list[JobEvent] = []
    summary = run_batch(BatchSettings(inputs, tmp_path / "out"), _segmenter(tiny_checkpoint), on_event=events.append)

    assert summary.all_ok
    notes = {r.source: r.note for r in summary.records}
    assert notes == {"img00.png": "", "stack.tif": "first of 3 pages",
                     "turned.jpg": "rotated 90° clockwise as its EXIF orientation (6) says",
                     "alpha.png": "alpha channel ignored: transparent pixels are segmented with their stored colour"}
    said = [e.message for e in events if e.kind == "info" and e.data.get("note")]
    assert sorted(said) == ["stack.tif: first of 3 pages",
                            "turned.jpg: rotated 90° clockwise as its EXIF orientation (6) says"]
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert {key: record["note"] for key, record in manifest["images"].items()} == notes
    with (tmp_path / "out" / "summary.csv").open(newline="", encoding="utf-8") as rows:
        assert {row["file"]: row["note"] for row in csv.DictReader(rows)} == notes
    image_events = {Path(e.path or "").name: e.data["note"] for e in events if e.kind == "image"}
    assert image_events == notes  # the app's table reads the record from these


def test_sub_folders_with_images_and_hidden_images_left_out_are_named(tmp_path: Path, tiny_checkpoint: Path) -> None:
    inputs = tmp_path / "in"
    _write_images(inputs, 1)
    _write_images(inputs / "day" / "deep", 1)  # images only further down: still a folder with images
    _write_images(inputs / ".cache", 1)  # a hidden folder: never walked, never named
    (inputs / "empty").mkdir()
    (inputs / "texts").mkdir()
    (inputs / "texts" / "notes.txt").write_text("no image")
    cv2.imwrite(str(inputs / ".hidden.png"), np.zeros((40, 56, 3), np.uint8))
    (inputs / ".DS_Store").write_text("hidden and not an image: never named")
    (inputs / "._img00.png").write_bytes(b"\x00\x05\x16\x07")  # macOS metadata beside a copy: never named
    segmenter = _segmenter(tiny_checkpoint)
    run_batch(BatchSettings(inputs / "day", tmp_path / "earlier", recursive=True), segmenter)
    (tmp_path / "earlier").rename(inputs / "earlier")  # an earlier run's outputs inside: not an input folder

    events: list[JobEvent] = []
    summary = run_batch(BatchSettings(inputs, tmp_path / "out"), segmenter, on_event=events.append)
    assert summary.all_ok and summary.total == 1
    assert summary.image_folders == ["day"] and summary.hidden_images == [".hidden.png"]
    assert events[0].data["image_folders"] == ["day"] and events[0].data["hidden_images"] == [".hidden.png"]
    assert summary.not_read_notes() == [
        "left out 1 sub-folder that holds images: day/; pass --recursive to segment it too",
        "left out 1 hidden image (its name begins with a dot): .hidden.png"]

    cv2.imwrite(str(inputs / "day" / ".x.png"), np.zeros((40, 56, 3), np.uint8))
    recursive = run_batch(BatchSettings(inputs, tmp_path / "out2", recursive=True), segmenter)
    assert recursive.total == 2 and recursive.image_folders == []
    assert recursive.hidden_images == [".hidden.png", "day/.x.png"]
    assert recursive.not_read_notes() == [
        "left out 1 file that is not an image: texts/notes.txt",
        "left out 2 hidden images (their names begin with a dot): .hidden.png, day/.x.png"]


def test_an_output_folder_that_cannot_be_written_is_refused_as_the_cli_says(tmp_path: Path,
                                                                            tiny_checkpoint: Path) -> None:
    inputs = tmp_path / "in"
    _write_images(inputs, 1)
    locked = tmp_path / "locked"
    locked.mkdir()
    undo = make_unwritable(locked)
    try:
        with pytest.raises(OutputPathError) as refused:
            run_batch(BatchSettings(inputs, locked), _segmenter(tiny_checkpoint))
        with pytest.raises(OutputPathError) as refused_below:
            run_batch(BatchSettings(inputs, locked / "out"), _segmenter(tiny_checkpoint))
    finally:
        undo()
    assert str(refused.value).startswith(f"{locked}: cannot write the output folder (")
    assert str(refused_below.value).startswith(f"{locked / 'out'}: cannot write the output folder (")
    assert "Errno" not in str(refused.value) and not list(locked.iterdir())
