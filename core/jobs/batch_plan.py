"""Plan a batch: find the input images, name their outputs, decide what resume can skip."""
from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..io.images import IMAGE_SUFFIXES
from .manifest import Manifest

OUTPUT_SUFFIXES = {"labels": "_labels.png", "overlay": "_overlay.png", "probs": "_probs.npy"}
# atomic_write_bytes names its temporary files ".NAME.XXXXXXXX.tmp"; a kill can leave one behind
_TEMP_FILE = re.compile(r"^\.(?P<name>.+)\.[A-Za-z0-9_]{8}\.tmp$")
_OWN_NAMES = (*OUTPUT_SUFFIXES.values(), "manifest.json", "summary.csv")


@dataclass(frozen=True)
class BatchSettings:
    """What a batch reads, what it writes, and how."""

    in_dir: Path  # the folder of input images (never modified)
    out_dir: Path  # outputs mirror in_dir's sub-folders here; created if missing
    recursive: bool = False  # also walk sub-folders (hidden ones and out_dir excluded)
    write_overlay: bool = False  # NAME_overlay.png: class colours over the image
    write_probs: bool = False  # NAME_probs.npy: (K, H, W) float16 class probabilities
    overwrite: bool = False  # ignore the manifest and replace existing outputs
    suffixes: tuple[str, ...] = IMAGE_SUFFIXES  # file extensions taken as images (any case)
    prefetch: int = 2  # images read ahead of inference; bounds the memory reading uses

    def __post_init__(self) -> None:
        if not self.in_dir.is_dir():
            raise ValueError(f"input folder {self.in_dir} does not exist or is not a folder")
        if self.out_dir.exists() and not self.out_dir.is_dir():
            raise ValueError(f"output {self.out_dir} exists and is not a folder; choose a folder for --out")
        if self.out_dir.resolve() == self.in_dir.resolve():
            raise ValueError(f"the output folder {self.out_dir} is the input folder; choose another --out "
                             "so inputs and outputs never mix")
        if self.prefetch < 1:
            raise ValueError(f"prefetch must be at least 1 image, got {self.prefetch}")

    @property
    def output_kinds(self) -> tuple[str, ...]:
        return ("labels",) + (("overlay",) if self.write_overlay else ()) + (("probs",) if self.write_probs else ())


@dataclass(frozen=True)
class ImageTask:
    """One input and where its outputs go: all the per-image work needs (picklable, for cluster jobs)."""

    source: Path  # the input file
    key: str  # source relative to the input folder, '/'-separated: the manifest key
    out_dir: Path  # the batch's output folder
    outputs: dict[str, str] = field(hash=False)  # kind -> path relative to out_dir
    replaceable: frozenset[str] = frozenset()  # outputs that may be replaced (ours, or --overwrite)

    def output_path(self, kind: str) -> Path:
        return self.out_dir / self.outputs[kind]

    def foreign_outputs(self) -> list[Path]:
        """Existing files at output paths that no batch of this folder wrote: never replaced."""
        return [self.output_path(k) for k, rel in self.outputs.items()
                if rel not in self.replaceable and self.output_path(k).exists()]


@dataclass
class BatchPlan:
    tasks: list[ImageTask]  # to segment now, in path order
    finished: list[str]  # keys the manifest shows finished and intact: skipped
    total: int  # images found


def find_images(in_dir: Path, recursive: bool, suffixes: tuple[str, ...], exclude: Path | None = None) -> list[Path]:
    """Image files in `in_dir` (sorted by relative path); hidden files/folders and `exclude` skipped."""
    wanted = {s.lower() for s in suffixes}
    excluded = exclude.resolve() if exclude is not None else None
    found: list[Path] = []
    for folder, dirs, files in os.walk(in_dir):
        base = Path(folder)
        dirs[:] = sorted(d for d in dirs if recursive and not d.startswith(".")
                         and (excluded is None or (base / d).resolve() != excluded))
        found.extend(base / name for name in files
                     if not name.startswith(".") and Path(name).suffix.lower() in wanted and (base / name).is_file())
    return sorted(found, key=lambda p: p.relative_to(in_dir).as_posix())


def output_stems(paths: list[Path], in_dir: Path) -> dict[Path, str]:
    """Relative output stem per input: `sub/photo`; `photo.png` beside `photo.jpg` gives `photo_png`."""
    counts = Counter((p.parent, p.stem) for p in paths)
    stems = {}
    for path in paths:
        stem = path.stem if counts[(path.parent, path.stem)] == 1 else f"{path.stem}_{path.suffix.lstrip('.')}"
        stems[path] = (path.parent.relative_to(in_dir) / stem).as_posix()
    return stems


def plan_batch(settings: BatchSettings, manifest: Manifest) -> BatchPlan:
    """Every image in the input folder either finished (skip) or a task; nothing is read yet."""
    exclude = settings.out_dir if _inside(settings.out_dir, settings.in_dir) else None
    paths = find_images(settings.in_dir, settings.recursive, settings.suffixes, exclude)
    kinds = settings.output_kinds
    tasks: list[ImageTask] = []
    finished: list[str] = []
    for path, stem in output_stems(paths, settings.in_dir).items():
        key = path.relative_to(settings.in_dir).as_posix()
        stat = path.stat()
        if not settings.overwrite and manifest.finished(key, kinds, stat.st_size, stat.st_mtime_ns):
            finished.append(key)
            continue
        outputs = {kind: stem + OUTPUT_SUFFIXES[kind] for kind in kinds}
        owned = set(outputs.values()) if settings.overwrite else manifest.owned_outputs(key)
        tasks.append(ImageTask(path, key, settings.out_dir, outputs, frozenset(owned)))
    return BatchPlan(tasks, finished, len(paths))


def remove_stale_temp_files(out_dir: Path) -> list[Path]:
    """Delete temporary files a killed batch left half-written (only names of our own outputs)."""
    removed = []
    for folder, _dirs, files in os.walk(out_dir):
        for name in files:
            match = _TEMP_FILE.match(name)
            if match and match["name"].endswith(_OWN_NAMES):
                (Path(folder) / name).unlink(missing_ok=True)
                removed.append(Path(folder) / name)
    return removed


def _inside(path: Path, folder: Path) -> bool:
    return path.resolve().is_relative_to(folder.resolve())
