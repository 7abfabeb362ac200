"""Nothing lost (issue 18, findings 1-3 and 5), with real `leanseg` processes on real files: inputs are
never written, outputs never clash, reruns are stable, damaged outputs are redone on resume."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from leanseg.core.io.output_names import path_hash
from leanseg.core.io.outputs import OutputPathError, atomic_write


def _leanseg(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "leanseg.core", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def _model(checkpoint: Path) -> tuple[str, ...]:
    return ("--model", str(checkpoint), "--device", "cpu", "--threads", "1", "--engine", "eager")


def _image(path: Path, height: int, width: int, seed: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pixels = np.random.default_rng(seed).integers(0, 255, (height, width, 3), dtype=np.uint8)
    assert cv2.imwrite(str(path), pixels)
    return path


def _shape(path: Path) -> tuple[int, ...]:
    pixels = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    assert pixels is not None, f"{path} does not decode"
    return tuple(pixels.shape)


def test_segment_never_writes_an_input(tmp_path: Path, tiny_checkpoint: Path) -> None:
    folder = tmp_path / "sd2"
    x = _image(folder / "x.png", 32, 40, 1)
    x_overlay = _image(folder / "x_overlay.png", 24, 56, 2)  # the user's file, named like x.png's overlay
    before = x_overlay.read_bytes()
    result = _leanseg("segment", x, x_overlay, "--out", folder, *_model(tiny_checkpoint))
    assert result.returncode == 1, result.stderr
    assert x_overlay.read_bytes() == before
    assert f"its output {x_overlay} is one of the inputs" in result.stderr
    assert _shape(folder / "x_overlay_labels.png") == (24, 56)  # the other input is segmented as usual
    assert not (folder / "x_labels.png").exists()  # refused before anything was written for x.png


def test_segment_replaces_only_its_own_outputs_unless_overwrite(tmp_path: Path, tiny_checkpoint: Path) -> None:
    image = _image(tmp_path / "photo.png", 32, 40, 3)
    out = tmp_path / "out"
    out.mkdir()
    (out / "photo_labels.png").write_bytes(b"the user's own file")
    refused = _leanseg("segment", image, "--out", out, *_model(tiny_checkpoint))
    assert refused.returncode == 1 and "was not written by leanseg segment" in refused.stderr
    assert (out / "photo_labels.png").read_bytes() == b"the user's own file"
    assert not (out / "photo_overlay.png").exists()
    replaced = _leanseg("segment", image, "--out", out, "--overwrite", *_model(tiny_checkpoint))
    assert replaced.returncode == 0, replaced.stderr
    assert _shape(out / "photo_labels.png") == (32, 40)
    again = _leanseg("segment", image, "--out", out, *_model(tiny_checkpoint))  # its own now: replaced freely
    assert again.returncode == 0, again.stderr


def test_segment_same_named_inputs_get_distinct_outputs(tmp_path: Path, tiny_checkpoint: Path) -> None:
    first = _image(tmp_path / "d1" / "a.png", 32, 40, 4)
    second = _image(tmp_path / "d2" / "a.png", 24, 56, 5)
    out = tmp_path / "o"
    result = _leanseg("segment", first, second, "--out", out, *_model(tiny_checkpoint))
    assert result.returncode == 0, result.stderr
    assert _shape(out / f"a_png_{path_hash('d1/a.png')}_labels.png") == (32, 40)
    assert _shape(out / f"a_png_{path_hash('d2/a.png')}_labels.png") == (24, 56)
    assert len(list(out.glob("*_labels.png"))) == 2 and len(list(out.glob("*_overlay.png"))) == 2
    assert f"-> a_png_{path_hash('d2/a.png')}_labels.png" in result.stdout  # says where a renamed output went


def test_batch_name_clash_settles_and_stays_settled_over_reruns(tmp_path: Path, tiny_checkpoint: Path) -> None:
    inputs = tmp_path / "in"
    sizes = {"c.png": (32, 40), "c.jpg": (24, 56), "c_jpg.png": (40, 24)}
    for seed, (name, (height, width)) in enumerate(sizes.items()):
        _image(inputs / name, height, width, seed)
    out = tmp_path / "out"
    mappings = []
    for round_args, segmented_now in (((), 3), (("--overwrite",), 3), ((), 0)):
        result = _leanseg("batch", inputs, "--out", out, *round_args, *_model(tiny_checkpoint))
        assert result.returncode == 0, result.stderr
        if segmented_now:
            assert f"{segmented_now} segmented now" in result.stdout and "0 failed" in result.stdout
        else:
            assert "all 3 already done (resumed); nothing to run" in result.stdout
        images = json.loads((out / "manifest.json").read_text())["images"]
        mappings.append({key: record["outputs"]["labels"]["path"] for key, record in images.items()})
    assert mappings[0] == mappings[1] == mappings[2]
    assert len(set(mappings[0].values())) == 3
    for name, (height, width) in sizes.items():
        assert _shape(out / mappings[0][name]) == (height, width), name  # each file holds its own input's labels


def test_resume_redoes_outputs_changed_in_place(tmp_path: Path, tiny_checkpoint: Path) -> None:
    inputs = tmp_path / "in"
    for i in range(3):
        _image(inputs / f"p{i}.png", 48, 64, 10 + i)
    out = tmp_path / "out"
    command = ("batch", inputs, "--out", out, "--probs", *_model(tiny_checkpoint))
    assert _leanseg(*command).returncode == 0
    labels, probs = out / "p0_labels.png", out / "p1_probs.npy"
    original = {path: path.read_bytes() for path in (labels, probs)}
    with open(labels, "r+b") as handle:  # 4 bytes changed in place in the compressed data: same size
        handle.seek(len(original[labels]) // 2)
        handle.write(bytes(b ^ 0xFF for b in original[labels][len(original[labels]) // 2:][:4]))
    edited = np.load(probs)
    edited[0, 0, 0] = 0.5 if edited[0, 0, 0] != 0.5 else 0.25
    np.save(probs, edited)  # still a valid .npy of the same size
    assert labels.stat().st_size == len(original[labels]) and probs.stat().st_size == len(original[probs])

    resumed = _leanseg(*command)
    assert resumed.returncode == 0, resumed.stderr
    assert "2 segmented now, 1 finished before" in resumed.stdout
    assert f"{labels}: changed since written (checksum differs); redoing p0.png" in resumed.stderr
    assert f"{probs}: changed since written (checksum differs); redoing p1.png" in resumed.stderr
    assert {path: path.read_bytes() for path in original} == original  # redone: the same bytes as written first


def test_segment_says_when_it_replaces_outputs_made_from_another_file(tmp_path: Path, tiny_checkpoint: Path) -> None:
    first = _image(tmp_path / "a" / "photo.png", 32, 40, 4)
    second = _image(tmp_path / "b" / "photo.png", 24, 56, 5)  # same name, another picture
    out = tmp_path / "out"
    assert _leanseg("segment", first, "--out", out, *_model(tiny_checkpoint)).returncode == 0
    rerun = _leanseg("segment", first, "--out", out, *_model(tiny_checkpoint))
    assert rerun.returncode == 0 and "made earlier from" not in rerun.stdout  # the same source: nothing to say
    other = _leanseg("segment", second, "--out", out, *_model(tiny_checkpoint))
    assert other.returncode == 0, other.stderr
    assert (f"photo.png: replaces photo_labels.png, photo_overlay.png, made earlier from {first.resolve()}"
            in other.stdout), other.stdout
    assert _shape(out / "photo_labels.png") == (24, 56)
    ledger = [json.loads(line) for line in (out / ".leanseg-segment.jsonl").read_text().splitlines()]
    assert {r["source"] for r in ledger if r["output"] == "photo_labels.png"} == {str(first.resolve()),
                                                                                   str(second.resolve())}
    assert ledger[-1]["source"] == str(second.resolve())  # the ledger says where the file now comes from


def test_an_output_that_cannot_be_written_is_named_with_its_reason(tmp_path: Path, tiny_checkpoint: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    with pytest.raises(OutputPathError,
                       match=rf"^cannot create the folder {re.escape(str(notes))}: a file of that name is in the way$"):
        atomic_write(notes / "x.png", lambda handle: handle.write(b"1"))
    below = re.escape(str(notes / "a"))
    with pytest.raises(OutputPathError, match=rf"^cannot create the folder {below}: a file above it is in the way$"):
        atomic_write(notes / "a" / "x.png", lambda handle: handle.write(b"1"))
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "x.png").mkdir()  # a folder where the file would go: the temp file is made, the rename fails
    with pytest.raises(OutputPathError, match=rf"^cannot write {re.escape(str(locked / 'x.png'))}: Is a directory$"):
        atomic_write(locked / "x.png", lambda handle: handle.write(b"1"))
    assert [p.name for p in locked.iterdir()] == ["x.png"]  # no temp file left behind
    inputs = tmp_path / "in"
    _image(inputs / "a.png", 16, 16, 0)
    result = _leanseg("batch", inputs, "--out", notes / "out", *_model(tiny_checkpoint))
    assert result.returncode != 0
    assert f"{notes}/out: cannot write the output folder ({notes} is a file)" in result.stderr  # as segment says it
    assert "Errno" not in result.stderr and notes.read_text() == "mine"


def test_an_output_folder_is_checked_up_front_by_the_option_that_named_it(tmp_path: Path) -> None:
    """A file in the way, a file above, a folder where no file can be made (by a probe: root passes permission
    bits): each refused with the option and the reason; nothing is created, a writable place passes."""
    from leanseg.core.io.outputs import check_output_folder

    from .unwritable import make_unwritable

    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    with pytest.raises(OutputPathError, match=rf"^--out {re.escape(str(notes))}: cannot write the output folder "
                                              r"\(it is a file; give a folder\)$"):
        check_output_folder(notes, "--out")
    with pytest.raises(OutputPathError, match=rf"^--json {re.escape(str(notes / 'e.json'))}: {re.escape(str(notes))}"
                                              r": cannot write the output folder \(it is a file"):
        check_output_folder(notes, f"--json {notes / 'e.json'}:")
    with pytest.raises(OutputPathError, match=rf"\({re.escape(str(notes))} is a file\)$"):
        check_output_folder(notes / "a" / "b", "--out")
    locked = tmp_path / "locked"
    locked.mkdir()
    undo = make_unwritable(locked)
    try:
        with pytest.raises(OutputPathError, match=rf"^--labels-dir {re.escape(str(locked / 'new'))}: cannot write "
                                                  rf"the output folder \(.*{re.escape(str(locked))}\b"):
            check_output_folder(locked / "new", "--labels-dir")
    finally:
        undo()
    check_output_folder(tmp_path / "new" / "deeper", "--out")  # writable above: fine, and made later, not now
    assert sorted(p.name for p in tmp_path.iterdir()) == ["locked", "notes.txt"] and not any(locked.iterdir())
