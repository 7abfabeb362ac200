"""What `leanseg segment` wrote in an output folder, so a rerun may replace its own files and nothing else.

`OUT/.leanseg-segment.jsonl`: one line per output, appended and fsynced before the output is
written (outputs are written atomically, so a kill leaves the old file or the new one, both ours).
A torn last line is ignored. The batch job keeps the same knowledge in its manifest.
"""
from __future__ import annotations

import io
import json
import os
from pathlib import Path

from ..io.outputs import make_folder

LEDGER_NAME = ".leanseg-segment.jsonl"


class SegmentLedger:
    """The set of output names (relative to the folder) that `leanseg segment` runs wrote there; another
    command keeps its own ledger file (`name`, e.g. video's `.leanseg-video.jsonl`)."""

    def __init__(self, out_dir: Path, name: str = LEDGER_NAME) -> None:
        self.path = out_dir / name
        self.written: dict[str, str] = {}  # output name -> the source it was last written from
        self._handle: io.TextIOWrapper | None = None
        try:
            lines = self.path.read_text(encoding="utf-8", errors="replace").splitlines()
        except (FileNotFoundError, NotADirectoryError):
            lines = []
        for line in lines:
            try:
                record = json.loads(line)
                self.written[str(record["output"])] = str(record.get("source", ""))
            except (ValueError, KeyError, TypeError):
                continue  # a line torn by a kill

    def owns(self, name: str) -> bool:
        return name in self.written

    def source_of(self, name: str) -> str | None:
        """The source `name` was last written from (None when no run here wrote it)."""
        return self.written.get(name)

    def add(self, name: str, source: Path) -> None:
        """Note, durably, that `name` is about to be written from `source` (a line only when that is news)."""
        if self.written.get(name) == str(source):
            return
        if self._handle is None:
            make_folder(self.path.parent)
            self._handle = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
        self._handle.write(json.dumps({"output": name, "source": str(source)}) + "\n")
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self.written[name] = str(source)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None
