"""Which files a `leanseg video` run may write: never its input, never one path twice, and an existing
file only if an earlier `leanseg video` run wrote it (or with --overwrite).

What video wrote is kept per folder in `.leanseg-video.jsonl`, one line per output, appended and
fsynced before the output is written (outputs are written atomically, so a kill leaves the old
file or the new one, both ours). A torn last line is ignored. `segment` keeps its own ledger.
Label PNGs are noted in the folder above --labels-dir (as `DIR/NAME`), so that folder holds only PNGs.
"""
from __future__ import annotations

import re
import threading
from pathlib import Path

from ..io.outputs import same_file
from ..memory.log import written_as_memory_log
from .segment_ledger import SegmentLedger

LEDGER_NAME = ".leanseg-video.jsonl"


class VideoOutputRefused(ValueError):
    """An output is the input, another output of the run, or a file no `leanseg video` wrote (without --overwrite)."""


class VideoOutputGuard:
    """Checks a run's planned outputs, then notes each one as ours just before it is written.

    `files` pairs each output file with what it is and the option that names it ("the CSV (--csv)");
    label PNGs are `<labels_stem>_<frame:06d>_labels.png` in `labels_dir`, named as they are written.
    `how_to_replace` ends the refusal of a user's file: the CLI's option, or what the app asks."""

    def __init__(self, input_path: Path, files: list[tuple[Path, str]], labels_dir: Path | None, labels_stem: str,
                 overwrite: bool, how_to_replace: str = "pass --overwrite to replace it",
                 memory_log_files: tuple[Path, ...] = ()) -> None:
        self.input_path = Path(input_path)
        self.files = files
        # the memory log and its sidecar: an earlier memory log there (any command's) is replaced as segment's is
        self.memory_log_files = {Path(path).resolve() for path in memory_log_files}
        self.labels_dir = labels_dir
        self.labels_pattern = re.compile(re.escape(labels_stem) + r"_\d{6,}_labels\.png")
        self.overwrite = overwrite
        self.how_to_replace = how_to_replace
        self._ledgers: dict[Path, SegmentLedger] = {}
        self._lock = threading.Lock()  # label PNGs are claimed on the sink's thread

    def check(self) -> None:
        """Raise VideoOutputRefused (one line: the file, the problem, the fix) for the first bad output."""
        seen: dict[Path, str] = {}
        for path, what in self.files:
            key = path.resolve()
            if key in seen:
                raise VideoOutputRefused(f"{path}: is both {seen[key]} and {what}; give them different paths")
            seen[key] = what
            if self._is_labels_png(path):
                raise VideoOutputRefused(f"{path}: {what} would be one of the label PNGs of --labels-dir; "
                                         "give it another name or folder")
            self._check_one(path, what)
        if self.labels_dir is not None and self.labels_dir.exists() and not self.labels_dir.is_dir():
            raise VideoOutputRefused(f"{self.labels_dir}: --labels-dir is a file; give a folder")
        for path in self._existing_labels():
            self._check_one(path, "a label PNG (--labels-dir)")

    def foreign_files(self) -> list[Path]:
        """The planned files (and existing label PNGs) that exist and no `leanseg video` wrote: those check()
        refuses unless overwrite. The input, the ledger and folders are left out: they are refused even then."""
        planned = [path for path, _ in self.files] + self._existing_labels()
        return [path for path in planned if self._is_foreign(path)]

    def replaced_from_elsewhere(self) -> list[tuple[Path, str]]:
        """The planned files an earlier `leanseg video` wrote from another video, with that video."""
        found = []
        for path, _ in self.files:
            folder, name = self._ledger_entry(path)
            earlier = self._ledger(folder).source_of(name)
            if earlier and earlier != str(self.input_path.resolve()) and path.is_file():
                found.append((path, earlier))
        return found

    def claim(self, path: Path) -> None:
        """Note `path` as written by `leanseg video`, before it is written."""
        folder, name = self._ledger_entry(Path(path))
        with self._lock:
            if folder not in self._ledgers:
                self._ledgers[folder] = SegmentLedger(folder, LEDGER_NAME)
            self._ledgers[folder].add(name, self.input_path.resolve())

    def close(self) -> None:
        for ledger in self._ledgers.values():
            ledger.close()

    def _check_one(self, path: Path, what: str) -> None:
        if path.name == LEDGER_NAME:
            raise VideoOutputRefused(f"{path}: {what} would replace leanseg video's record of what it wrote; "
                                     "choose another name")
        if self._is_input(path):
            raise VideoOutputRefused(f"{path}: {what} is the input video and is never overwritten; "
                                     "choose another path")
        if path.is_dir():
            raise VideoOutputRefused(f"{path}: {what} is a folder; give a file name")
        if not self.overwrite and self._is_foreign(path):
            raise VideoOutputRefused(f"{path}: {what} already exists and was not written by leanseg video; "
                                     + self.how_to_replace)

    def _is_foreign(self, path: Path) -> bool:
        """An existing file that is not the input or the ledger and that no `leanseg video` wrote."""
        return (path.exists() and not path.is_dir() and path.name != LEDGER_NAME and not self._is_input(path)
                and not self._owned(path)
                and not (path.resolve() in self.memory_log_files and written_as_memory_log(path)))

    def _is_input(self, path: Path) -> bool:
        return same_file(path, self.input_path)  # hard links too

    def _owned(self, path: Path) -> bool:
        folder, name = self._ledger_entry(path)
        return self._ledger(folder).owns(name)

    def _ledger(self, folder: Path) -> SegmentLedger:
        """The ledger this run writes in `folder`, else what the folder's ledger file says now (read-only)."""
        return self._ledgers.get(folder) or SegmentLedger(folder, LEDGER_NAME)

    def _ledger_entry(self, path: Path) -> tuple[Path, str]:
        """(the folder whose ledger notes `path`, the name it is noted under)."""
        folder = path.parent.resolve()
        if self._is_labels_png(path):
            return folder.parent, f"{folder.name}/{path.name}"
        return folder, path.name

    def _is_labels_png(self, path: Path) -> bool:
        return (self.labels_dir is not None and path.parent.resolve() == self.labels_dir.resolve()
                and self.labels_pattern.fullmatch(path.name) is not None)

    def _existing_labels(self) -> list[Path]:
        if self.labels_dir is None or not self.labels_dir.is_dir():
            return []
        return sorted(p for p in self.labels_dir.iterdir() if self.labels_pattern.fullmatch(p.name))
