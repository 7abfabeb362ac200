"""Plan a batch: find the input images, name their outputs, decide what resume can skip."""
from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..io.images import IMAGE_SUFFIXES
from ..io.output_names import OUTPUT_SUFFIXES, output_file_name, output_stems, stem_at_level
from .manifest import CLI_OVERWRITE, INPUT_CHANGED, MANIFEST_NAME, Manifest

# atomic_write_bytes names its temporary files ".NAME.XXXXXXXX.tmp"; a kill can leave one behind
_TEMP_FILE = re.compile(r"^\.(?P<name>.+)\.[A-Za-z0-9_]{8}\.tmp$")
_OWN_NAMES = (*OUTPUT_SUFFIXES.values(), "manifest.json", "summary.csv")
CLI_RECURSE = "pass --recursive"  # how the CLI says to take sub-folders in; the app names its checkbox instead

InputKind = Literal["image", "other", "hidden image"]  # what the walk found: read, named as left out, or counted


@dataclass(frozen=True)
class BatchSettings:
    """What a batch reads, what it writes, and how."""

    in_dir: Path  # the folder of input images (never modified)
    out_dir: Path  # outputs mirror in_dir's sub-folders here; created if missing
    recursive: bool = False  # also walk sub-folders (hidden ones and out_dir excluded)
    write_overlay: bool = False  # NAME_overlay.png: class colours over the image
    overlay_alpha: float = 0.5  # opacity of the class colours in overlays, 0..1
    write_probs: bool = False  # NAME_probs.npy: (K, H, W) float16 class probabilities
    overwrite: bool = False  # ignore the manifest and replace existing outputs
    suffixes: tuple[str, ...] = IMAGE_SUFFIXES  # file extensions taken as images (any case)
    prefetch: int = 2  # images read ahead of inference; bounds the memory reading uses
    how_to_overwrite: str = CLI_OVERWRITE  # how a refusal says to replace or redo (the app: its checkbox)

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
        if not 0.0 <= self.overlay_alpha <= 1.0:
            raise ValueError(f"overlay alpha must be from 0 to 1, got {self.overlay_alpha}")

    @property
    def output_kinds(self) -> tuple[str, ...]:
        return ("labels",) + (("overlay",) if self.write_overlay else ()) + (("probs",) if self.write_probs else ())

    @property
    def output_options(self) -> dict[str, Any]:
        """The outputs as the manifest records them (kinds, overlay alpha): resuming with others is refused."""
        options: dict[str, Any] = {"kinds": list(self.output_kinds)}
        if self.write_overlay:
            options["overlay_alpha"] = self.overlay_alpha
        return options


@dataclass(frozen=True)
class ImageTask:
    """One input and where its outputs go: all the per-image work needs (picklable, for cluster jobs)."""

    source: Path  # the input file
    key: str  # source relative to the input folder, '/'-separated: the manifest key
    out_dir: Path  # the batch's output folder
    outputs: dict[str, str] = field(hash=False)  # kind -> path relative to out_dir
    replaceable: frozenset[str] = frozenset()  # outputs that may be replaced (ours, or --overwrite)
    forbidden: frozenset[str] = frozenset()  # outputs that are inputs of this batch: never written
    overlay_alpha: float = 0.5  # opacity of the class colours in the overlay
    how_to_overwrite: str = CLI_OVERWRITE  # ends the refusal of a file not ours (BatchSettings')

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
    damaged: list[str] = field(default_factory=list)  # a line per finished image redone: an output damaged
    changed: list[str] = field(default_factory=list)  # keys of finished images redone: the input changed since
    left_out: list[str] = field(default_factory=list)  # files in the input folder that are not images: not read
    image_folders: list[str] = field(default_factory=list)  # sub-folders with images, not read (not recursive)
    hidden_images: list[str] = field(default_factory=list)  # image files named ".NAME": not read


@dataclass
class InputFiles:
    images: list[Path]  # files with an image suffix, sorted by path relative to the input folder
    left_out: list[Path]  # other files (not hidden), same order: never read
    image_folders: list[Path] = field(default_factory=list)  # sub-folders that hold images, not walked (not
    # recursive; hidden ones, `exclude` and leanseg's outputs aside): never read
    hidden_images: list[Path] = field(default_factory=list)  # hidden files with an image suffix: never read

    def keys(self, in_dir: Path) -> dict[str, list[str]]:
        """The files and folders left out, by path relative to `in_dir`: left_out, image_folders, hidden_images."""
        return {name: [p.relative_to(in_dir).as_posix() for p in getattr(self, name)]
                for name in ("left_out", "image_folders", "hidden_images")}


def find_inputs(in_dir: Path, recursive: bool, suffixes: tuple[str, ...], exclude: Path | None = None) -> InputFiles:
    """Image files in `in_dir`, and what is left out (all sorted by relative path): other files, hidden image
    files, and (not recursive) the sub-folders that hold images. Hidden folders, other hidden files, `exclude`
    and sub-folders that hold a batch manifest (leanseg's own earlier outputs) are skipped unsaid."""
    found: dict[InputKind, list[Path]] = {"image": [], "other": [], "hidden image": []}
    for path, kind in _walk_inputs(in_dir, recursive, suffixes, exclude):
        found[kind].append(path)

    def by_key(p: Path) -> str:
        return p.relative_to(in_dir).as_posix()
    return InputFiles(images=sorted(found["image"], key=by_key), left_out=sorted(found["other"], key=by_key),
                      image_folders=[] if recursive else _folders_with_images(in_dir, suffixes, exclude),
                      hidden_images=sorted(found["hidden image"], key=by_key))


def require_images(settings: BatchSettings) -> None:
    """Raise ValueError naming the folder, the suffixes looked for and what it holds instead, when the input
    folder holds no image, or naming a folder the batch would go into and cannot read; cheap otherwise (without
    --recursive the walk stops at the first image; with it, every folder is listed now, not after the model
    loads). Reads no image, writes nothing."""
    exclude = _excluded_output(settings)
    kinds = (kind for _path, kind in _walk_inputs(settings.in_dir, settings.recursive, settings.suffixes, exclude))
    if "image" in (list(kinds) if settings.recursive else kinds):
        return
    where = "or its sub-folders " if settings.recursive else ""
    message = f"no images in {settings.in_dir} {where}(looked for {', '.join(settings.suffixes)})"
    found = find_inputs(settings.in_dir, settings.recursive, settings.suffixes, exclude).keys(settings.in_dir)
    if found["left_out"]:
        message += "; " + left_out_note(found["left_out"], "found")
    if found["hidden_images"]:
        message += "; " + hidden_images_note(found["hidden_images"], "found")
    if not settings.recursive and any(p.is_dir() and not p.name.startswith(".") for p in settings.in_dir.iterdir()):
        message += f"; {CLI_RECURSE} to look in its sub-folders"
    raise ValueError(message)


def changed_inputs_note(keys: list[str], named: int = 5) -> str:
    """'redoing 2 images changed since they were segmented (size or time stamp): a.png, b.png'."""
    one = len(keys) == 1
    return (f"redoing {len(keys)} image{'' if one else 's'} changed since {'it was' if one else 'they were'} "
            f"segmented (size or time stamp): {_names(keys, named)}")


def left_out_note(keys: list[str], verb: str = "left out", named: int = 5) -> str:
    """'left out 2 files that are not images: c.webp, notes.txt' (the first `named` names, then a count)."""
    if len(keys) == 1:
        return f"{verb} 1 file that is not an image: {_names(keys, named)}"
    return f"{verb} {len(keys)} files that are not images: {_names(keys, named)}"


def image_folders_note(keys: list[str], how_to_recurse: str = CLI_RECURSE, named: int = 5) -> str:
    """'left out 2 sub-folders that hold images: day/, night/; pass --recursive to segment them too'."""
    folders = [f"{key}/" for key in keys]
    if len(keys) == 1:
        return f"left out 1 sub-folder that holds images: {_names(folders, named)}; {how_to_recurse} to segment it too"
    return (f"left out {len(keys)} sub-folders that hold images: {_names(folders, named)}; {how_to_recurse} to "
            "segment them too")


def hidden_images_note(keys: list[str], verb: str = "left out", named: int = 5) -> str:
    """'left out 1 hidden image (its name begins with a dot): .scan.png' (the first `named` names, then a count)."""
    if len(keys) == 1:
        return f"{verb} 1 hidden image (its name begins with a dot): {_names(keys, named)}"
    return f"{verb} {len(keys)} hidden images (their names begin with a dot): {_names(keys, named)}"


def not_read_notes(left_out: list[str], image_folders: list[str], hidden_images: list[str],
                   how_to_recurse: str = CLI_RECURSE) -> list[str]:
    """One line for each kind of thing a batch left out (files that are not images, sub-folders with images,
    hidden images), as `leanseg batch` ends with them; `how_to_recurse` ends the sub-folders' line."""
    notes = [left_out_note(left_out)] if left_out else []
    if image_folders:
        notes.append(image_folders_note(image_folders, how_to_recurse))
    if hidden_images:
        notes.append(hidden_images_note(hidden_images))
    return notes


def _names(keys: list[str], named: int) -> str:
    """The first `named` of `keys`, then how many more."""
    return ", ".join(keys[:named]) + (f" and {len(keys) - named} more" if len(keys) > named else "")


def _walk_inputs(in_dir: Path, recursive: bool, suffixes: tuple[str, ...],
                 exclude: Path | None) -> Iterator[tuple[Path, InputKind]]:
    """(file, what it is) for every file `find_inputs` considers, in no particular order: images and other files
    by their suffix, hidden files only when they have an image suffix."""
    wanted = {s.lower() for s in suffixes}
    excluded = exclude.resolve() if exclude is not None else None
    for folder, dirs, files in os.walk(in_dir, onerror=_refuse_unreadable):
        base = Path(folder)
        dirs[:] = sorted(d for d in dirs if recursive and _walked(base / d, excluded))
        for name in sorted(files):
            is_image = Path(name).suffix.lower() in wanted and not name.startswith("._")  # ._x.jpg: macOS metadata
            if (is_image or not name.startswith(".")) and _is_file(base / name):
                yield base / name, ("hidden image" if name.startswith(".") else "image" if is_image else "other")


def _is_file(path: Path) -> bool:
    """Path.is_file, with a folder whose entries cannot be looked at (listed, not entered) said as one."""
    try:
        return path.is_file()
    except OSError as err:
        raise _unreadable(path.parent, err) from None


def _walked(folder: Path, excluded: Path | None) -> bool:
    """Whether a recursive walk goes into `folder`: not hidden, not the output folder, not leanseg's outputs."""
    if folder.name.startswith(".") or (excluded is not None and folder.resolve() == excluded):
        return False
    try:
        return not (folder / MANIFEST_NAME).is_file()
    except OSError as err:  # a folder that cannot be entered: said, not skipped unsaid
        raise _unreadable(folder, err) from None


def _refuse_unreadable(err: OSError) -> None:
    """os.walk's onerror: a folder that cannot be listed is an error naming it (os.walk would skip it unsaid)."""
    raise _unreadable(err.filename, err) from None


def _unreadable(folder: str | Path, err: OSError) -> ValueError:
    return ValueError(f"{folder}: cannot read this folder ({err.strerror or err})")


def _folders_with_images(in_dir: Path, suffixes: tuple[str, ...], exclude: Path | None) -> list[Path]:
    """The sub-folders of `in_dir` that a recursive walk would go into and find an image in (sorted by name);
    the search of each stops at its first image."""
    excluded = exclude.resolve() if exclude is not None else None
    _folder, dirs, _files = next(os.walk(in_dir), ("", [], []))
    return [in_dir / d for d in sorted(dirs)
            if not (in_dir / d).is_symlink() and _holds_images(in_dir / d, suffixes, exclude, excluded)]


def _holds_images(folder: Path, suffixes: tuple[str, ...], exclude: Path | None, excluded: Path | None) -> bool:
    """Whether a recursive walk would go into `folder` and find an image; one that cannot be read does not count
    (a batch without --recursive never reads it: it is only a note's)."""
    try:
        return _walked(folder, excluded) and any(
            kind == "image" for _path, kind in _walk_inputs(folder, True, suffixes, exclude))
    except ValueError:
        return False


def plan_batch(settings: BatchSettings, manifest: Manifest) -> BatchPlan:
    """Every image in the input folder either finished (skip) or a task; nothing is read yet.

    Output names follow `io.output_names` (unique in the run, the same on every rerun); a finished
    image keeps the outputs its record names, and a task never takes a name recorded for another."""
    found = find_inputs(settings.in_dir, settings.recursive, settings.suffixes, _excluded_output(settings))
    paths = found.images
    kinds = settings.output_kinds
    keys = {path: path.relative_to(settings.in_dir).as_posix() for path in paths}
    stems = output_stems(keys.values())
    finished: list[str] = []
    damaged: list[str] = []
    changed: list[str] = []
    todo: list[tuple[Path, str]] = []
    for path, key in keys.items():
        stat = path.stat()
        if not settings.overwrite:
            intact, damage = manifest.verify(key, kinds, stat.st_size, stat.st_mtime_ns)
            if intact:
                finished.append(key)
                continue
            if damage == INPUT_CHANGED:
                changed.append(key)
            elif damage:
                damaged.append(damage)
        todo.append((path, key))
    taken = {f.path.casefold(): key for key in finished for f in manifest.records[key].outputs.values()}
    inputs = _resolved_inputs(paths, settings)
    tasks: list[ImageTask] = []
    for path, key in todo:
        outputs = {kind: output_file_name(stems[key], kind) for kind in kinds}
        if any(taken.get(rel.casefold(), key) != key for rel in outputs.values()):
            outputs = {kind: output_file_name(stem_at_level(key, 2), kind) for kind in kinds}
        replaceable = frozenset(rel for rel in outputs.values() if settings.overwrite or manifest.owns(rel, key))
        forbidden = frozenset(rel for rel in outputs.values() if (settings.out_dir / rel).resolve() in inputs)
        tasks.append(ImageTask(path, key, settings.out_dir, outputs, replaceable, forbidden, settings.overlay_alpha,
                               settings.how_to_overwrite))
    return BatchPlan(tasks, finished, len(paths), damaged, changed, **found.keys(settings.in_dir))


def _excluded_output(settings: BatchSettings) -> Path | None:
    """The output folder, when it lies inside the input folder: its files are never inputs."""
    return settings.out_dir if _inside(settings.out_dir, settings.in_dir) else None


def _resolved_inputs(paths: list[Path], settings: BatchSettings) -> set[Path]:
    """The inputs' real paths, when the output folder overlaps the input folder (else no output can be one)."""
    if not (_inside(settings.out_dir, settings.in_dir) or _inside(settings.in_dir, settings.out_dir)):
        return set()
    return {path.resolve() for path in paths}


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
