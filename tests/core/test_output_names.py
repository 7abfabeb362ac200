"""The one output-naming rule (core/io/output_names.py): unique within a run, the same on every rerun."""
from __future__ import annotations

import itertools

import pytest

from leanseg.core.io.output_names import (
    frame_labels_name,
    output_file_name,
    output_stem,
    output_stems,
    path_hash,
)


def test_lone_inputs_keep_their_stem_and_mirror_their_folder() -> None:
    assert output_stems(["photo.png", "sub/photo.png"]) == {"photo.png": "photo", "sub/photo.png": "sub/photo"}
    assert output_file_name("sub/photo", "overlay") == "sub/photo_overlay.png"
    assert output_stem("/data/clip.mp4") == "clip" and frame_labels_name("clip", 12) == "clip_000012_labels.png"


def test_same_stem_gets_the_extension_and_a_remaining_clash_the_path_hash() -> None:
    stems = output_stems(["c.png", "c.jpg", "c_jpg.png"])
    assert stems["c.png"] == "c_png"
    assert stems["c.jpg"] == f"c_jpg_{path_hash('c.jpg')}"  # c_jpg is also c_jpg.png's stem
    assert stems["c_jpg.png"] == "c_jpg_png"
    assert len(set(stems.values())) == 3


def test_names_depend_on_the_set_of_inputs_only() -> None:
    inputs = ["c.png", "c.jpg", "c_jpg.png", "A.png", "a.png", "c_jpg_png.tif"]
    first = output_stems(inputs)
    for order in itertools.permutations(inputs):
        assert output_stems(list(order)) == first
    assert len({name.casefold() for name in first.values()}) == len(inputs)  # unique even case-insensitively


def test_flat_names_for_same_named_files_of_different_folders() -> None:
    stems = output_stems(["d1/a.png", "d2/a.png"], mirror_folders=False)
    assert stems == {"d1/a.png": f"a_png_{path_hash('d1/a.png')}", "d2/a.png": f"a_png_{path_hash('d2/a.png')}"}
    assert stems["d1/a.png"] != stems["d2/a.png"]


def test_an_unknown_kind_lists_the_choices() -> None:
    with pytest.raises(ValueError, match="labels, overlay, probs"):
        output_file_name("x", "mask")
