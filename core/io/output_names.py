"""The one rule that names outputs, shared by `segment`, `batch`, `video --labels-dir` and the app's save.

An input's outputs are `STEM_labels.png`, `STEM_overlay.png` and `STEM_probs.npy`, where STEM is
(each step taken only when the one before gives two inputs of the run the same name in one
output folder, compared case-insensitively):

0. the file's stem: `photo.png` -> `photo`;
1. the stem and the extension: `photo.png` -> `photo_png`, `photo.jpg` -> `photo_jpg`;
2. that and the first 8 hex digits of blake2b(the input's relative path):
   `c.jpg` beside `c.png` and `c_jpg.png` -> `c_jpg_acec91c4`.

Names depend only on the set of inputs, never on their order or on earlier runs, so every rerun
gives the same names. `batch` mirrors sub-folders (relative path = below IN_DIR); `segment` writes
one flat folder (relative path = below the inputs' common folder).
"""
from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

OUTPUT_SUFFIXES = {"labels": "_labels.png", "overlay": "_overlay.png", "probs": "_probs.npy"}
HASH_DIGITS = 8  # hex digits of the path hash in a level-2 name
_LEVELS = 3


def output_stem(image_path: str | Path) -> str:
    """A lone input's stem (rule step 0): `photo.tif` -> `photo`."""
    return PurePosixPath(Path(image_path).name).stem


def output_file_name(stem: str, kind: str) -> str:
    """`photo`, `labels` -> `photo_labels.png`; kinds: labels, overlay, probs."""
    if kind not in OUTPUT_SUFFIXES:
        raise ValueError(f"unknown output kind {kind!r}; choose one of {', '.join(OUTPUT_SUFFIXES)}")
    return stem + OUTPUT_SUFFIXES[kind]


def frame_labels_name(stem: str, frame_index: int) -> str:
    """A video frame's labels PNG: `clip`, 12 -> `clip_000012_labels.png`."""
    return output_file_name(f"{stem}_{frame_index:06d}", "labels")


def path_hash(relative_path: str) -> str:
    """The 8 hex digits a clashing name gets: blake2b of the '/'-separated relative input path."""
    return hashlib.blake2b(relative_path.encode("utf-8"), digest_size=8).hexdigest()[:HASH_DIGITS]


def stem_at_level(relative_path: str, level: int, mirror_folders: bool = True) -> str:
    """The output stem (with its relative folder when mirroring) of one input at rule step `level`."""
    path = PurePosixPath(relative_path)
    stem, extension = path.stem, path.suffix.lstrip(".")
    name = stem if level == 0 else f"{stem}_{extension}" if level == 1 else \
        f"{stem}_{extension}_{path_hash(relative_path)}"
    return str(path.parent / name) if mirror_folders and str(path.parent) != "." else name


def output_stems(relative_paths: Iterable[str], mirror_folders: bool = True) -> dict[str, str]:
    """Relative input path ('/'-separated) -> output stem, unique within the run (see the module doc).

    Raises ValueError only if two different paths hash alike at step 2 (about 1 in 4e9 per pair)."""
    keys = sorted(set(relative_paths))
    level = dict.fromkeys(keys, 0)
    while True:
        names = {key: stem_at_level(key, level[key], mirror_folders) for key in keys}
        groups: dict[str, list[str]] = defaultdict(list)
        for key, name in names.items():
            groups[name.casefold()].append(key)
        clashes = [members for members in groups.values() if len(members) > 1]
        if not clashes:
            return names
        raised = False
        for members in clashes:
            for key in members:
                if level[key] < _LEVELS - 1:
                    level[key] += 1
                    raised = True
        if not raised:
            members = clashes[0]
            raise ValueError(f"inputs {', '.join(members)} would get the same output name {names[members[0]]}; "
                             "rename one of them")
