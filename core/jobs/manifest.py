"""The batch manifest: which inputs are finished, with which outputs, so a batch can resume.

On disk: `manifest.json` (a snapshot, replaced atomically) plus `manifest.journal.jsonl` (one line
appended and fsynced per event since the snapshot). An image's line is on disk before `run_batch`
moves on, so a SIGKILL loses at most the image in flight; the journal is folded into the snapshot
(and `summary.csv` rewritten) every few seconds and at the end, so the cost stays linear in images.
"""
from __future__ import annotations

import csv
import io
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from ..io.outputs import atomic_write_bytes, make_folder, output_damage
from .records import ImageRecord, OutputFile, relative_path, relative_paths

__all__ = ["FORMAT", "INPUT_CHANGED", "JOURNAL_NAME", "MANIFEST_NAME", "SUMMARY_NAME", "ImageRecord", "Manifest",
           "ManifestError", "OutputFile", "summary_csv"]

MANIFEST_NAME = "manifest.json"
JOURNAL_NAME = "manifest.journal.jsonl"
SUMMARY_NAME = "summary.csv"
FORMAT = "leanseg-batch-manifest/1"
INPUT_CHANGED = "input changed"  # `Manifest.verify`'s damage for an input changed since it was segmented
SNAPSHOT_EVERY_S = 5.0  # fold the journal into manifest.json at most this often (and at the end)


class ManifestError(Exception):
    """The output folder's manifest cannot be used; the message says why and what to do."""


CLI_OVERWRITE = "pass --overwrite"  # how the CLI's refusals end; the app names its checkbox instead


class Manifest:
    """Finished and in-progress images of one output folder; thread-safe."""

    def __init__(self, out_dir: Path, fingerprint: dict[str, Any], class_names: tuple[str, ...],
                 how_to_overwrite: str = CLI_OVERWRITE) -> None:
        self.out_dir = out_dir
        self.how_to_overwrite = how_to_overwrite  # ends a refusal: the CLI's option, or the app's checkbox
        self.fingerprint = fingerprint  # what made the outputs: model (name, sha256), precision, mirror, outputs
        self.class_names = class_names
        self.records: dict[str, ImageRecord] = {}
        self.pending: dict[str, list[str]] = {}  # source -> outputs being written right now
        self.owned: set[str] = set()  # every output a batch of this folder wrote: ours to replace
        self._lock = threading.Lock()
        self._journal: io.TextIOWrapper | None = None
        self._last_snapshot = time.monotonic()

    @classmethod
    def open(cls, out_dir: Path, fingerprint: dict[str, Any], class_names: tuple[str, ...],
             fresh: bool = False, how_to_overwrite: str = CLI_OVERWRITE) -> Manifest:
        """Load the folder's manifest (snapshot + journal), or start an empty one when `fresh`."""
        manifest = cls(out_dir, fingerprint, class_names, how_to_overwrite)
        if not fresh:
            manifest._load()
        make_folder(out_dir)
        manifest._write_snapshot()  # records the fingerprint; an empty journal follows
        return manifest

    def _load(self) -> None:
        path = self.out_dir / MANIFEST_NAME
        summary = self.out_dir / SUMMARY_NAME
        if summary.exists() and not path.exists() and not (self.out_dir / JOURNAL_NAME).exists():
            raise ManifestError(f"{summary}: exists and no batch of this folder wrote it (there is no "
                                f"{MANIFEST_NAME}), so it is not replaced; move it, {self.how_to_overwrite} to "
                                "replace it, or choose another output folder")
        if path.exists():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                records, pending, owned = _parse_snapshot(data)
            except (ValueError, KeyError, TypeError) as err:
                raise ManifestError(f"{path}: not a readable batch manifest ({err}); {self.how_to_overwrite} to "
                                    "start this folder over, or choose another output folder") from err
            if not _same_results(data.get("fingerprint"), self.fingerprint):
                options = (_output_options_differing(data.get("fingerprint"), self.fingerprint)
                           if self.how_to_overwrite == CLI_OVERWRITE else "")  # CLI options for the CLI only
                made = (f"made {options}; rerun {options}," if options else
                        f"made with {_describe(data.get('fingerprint'), self.fingerprint)}, not "
                        f"{_describe(self.fingerprint, data.get('fingerprint'))};")
                raise ManifestError(f"{self.out_dir} holds results {made} {self.how_to_overwrite} to redo them, or "
                                    "choose another output folder")
            self.records, self.pending = records, pending
            self.owned = owned | {f.path for r in records.values() for f in r.outputs.values()}
        journal = self.out_dir / JOURNAL_NAME
        if journal.exists():
            for line in journal.read_text(errors="replace").splitlines():
                try:
                    self._apply(json.loads(line))
                except (ValueError, KeyError, TypeError):
                    continue  # a line torn by a kill: its image was in flight and is redone

    def _apply(self, entry: Any) -> None:
        if not isinstance(entry, dict):
            raise ValueError("a journal line is not a JSON object")
        if "pending" in entry:
            self.pending[relative_path(entry["pending"], "pending source")] = relative_paths(entry["outputs"],
                                                                                             "pending outputs")
        else:
            record = ImageRecord.from_json(entry["record"])
            self.records[record.source] = record
            self.pending.pop(record.source, None)
            self.owned.update(f.path for f in record.outputs.values())

    def owns(self, path: str, source: str) -> bool:
        """True when a batch of this folder wrote `path` (for any input, in any run), or began to write it
        for `source`: safe to replace. Kept when a later attempt fails, so a disturbed job still resumes."""
        with self._lock:
            return path in self.owned or path in self.pending.get(source, ())

    def finished(self, source: str, kinds: tuple[str, ...], input_bytes: int, input_mtime_ns: int) -> bool:
        """True when `source` finished ok from this very input and each wanted output is intact."""
        return self.verify(source, kinds, input_bytes, input_mtime_ns)[0]

    def verify(self, source: str, kinds: tuple[str, ...], input_bytes: int,
               input_mtime_ns: int) -> tuple[bool, str]:
        """(finished, damage): finished when `source` finished ok from this very input and each wanted output
        has the size and checksum it was written with; damage names a recorded output that does not, or is
        INPUT_CHANGED when the input's size or time stamp is not the one it was segmented from."""
        with self._lock:
            record = self.records.get(source)
        if record is None or record.status != "ok":
            return False, ""
        if (record.input_bytes, record.input_mtime_ns) != (input_bytes, input_mtime_ns):
            return False, INPUT_CHANGED
        for kind in kinds:
            output = record.outputs.get(kind)
            if output is None:
                return False, ""
            damage = output_damage(self.out_dir / output.path, output.bytes, output.blake2b)
            if damage:
                return False, f"{self.out_dir / output.path}: {damage}; redoing {source}"
        return True, ""

    def begin(self, source: str, outputs: list[str]) -> None:
        """Note, before writing them, which outputs `source` is about to get."""
        with self._lock:
            self.pending[source] = list(outputs)
            self._append({"pending": source, "outputs": list(outputs)})

    def finish(self, record: ImageRecord) -> None:
        """Record one finished (or failed) image durably; snapshot now and then."""
        with self._lock:
            self.records[record.source] = record
            self.pending.pop(record.source, None)
            self.owned.update(f.path for f in record.outputs.values())
            self._append({"record": record.to_json()})
            if time.monotonic() - self._last_snapshot >= SNAPSHOT_EVERY_S:
                self._write_snapshot()

    def close(self) -> None:
        """Write the final snapshot and summary.csv; drop the journal."""
        with self._lock:
            self._write_snapshot()

    def _append(self, entry: dict[str, Any]) -> None:
        if self._journal is None:
            self._journal = open(self.out_dir / JOURNAL_NAME, "a", encoding="utf-8")  # noqa: SIM115
        self._journal.write(json.dumps(entry) + "\n")
        self._journal.flush()
        os.fsync(self._journal.fileno())

    def _write_snapshot(self) -> None:
        data = {
            "format": FORMAT,
            "fingerprint": self.fingerprint,
            "class_names": list(self.class_names),
            "images": {key: self.records[key].to_json() for key in sorted(self.records)},
            "pending": self.pending,
            "owned": sorted(self.owned - {f.path for r in self.records.values() for f in r.outputs.values()}),
        }
        atomic_write_bytes(self.out_dir / MANIFEST_NAME, json.dumps(data, indent=1).encode())
        atomic_write_bytes(self.out_dir / SUMMARY_NAME, summary_csv(self.records, self.class_names).encode())
        if self._journal is not None:
            self._journal.close()
            self._journal = None
        (self.out_dir / JOURNAL_NAME).unlink(missing_ok=True)  # its lines are all in the snapshot now
        self._last_snapshot = time.monotonic()


def _parse_snapshot(data: Any) -> tuple[dict[str, ImageRecord], dict[str, list[str]], set[str]]:
    """manifest.json's records, pending outputs and owned outputs, every field checked (ValueError)."""
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    if data.get("format") != FORMAT:
        raise ValueError(f"format {data.get('format')!r}, expected {FORMAT!r}")
    images, pending = data.get("images"), data.get("pending", {})
    if not isinstance(images, dict) or not isinstance(pending, dict):
        raise ValueError("'images' and 'pending' must be objects")
    records = {key: ImageRecord.from_json(value) for key, value in images.items()}
    for key, record in records.items():
        if record.source != key:
            raise ValueError(f"the record under {key!r} is for {record.source!r}")
    return records, {relative_path(key, "pending source"): relative_paths(value, "pending outputs")
                     for key, value in pending.items()}, set(relative_paths(data.get("owned", []), "owned"))


def summary_csv(records: dict[str, ImageRecord], class_names: tuple[str, ...]) -> str:
    """One row per input, sorted by path: size, time, peak memory, class shares, status, error, note.

    A plain CSV (one header row, units in the column names) that csv.DictReader, pandas and spreadsheets open."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["file", "width_px", "height_px", "time_s", "peak_bytes",
                     *(f"fraction {name}" for name in class_names), "status", "error", "note"])
    for key in sorted(records):
        record = records[key]
        fractions = [f"{x:.6f}" for x in record.class_fraction] or [""] * len(class_names)
        writer.writerow([record.source, record.width, record.height, f"{record.seconds:.4f}", record.peak_bytes,
                         *fractions, record.status, record.error, record.note])
    return buffer.getvalue()


def recorded_outputs(out_dir: Path) -> dict[str, Any] | None:
    """The output options (kinds, overlay alpha) the batch results in `out_dir` were made with; None when the
    folder holds no readable manifest or one from before they were recorded."""
    try:
        fingerprint = json.loads((out_dir / MANIFEST_NAME).read_text(encoding="utf-8")).get("fingerprint")
    except (OSError, ValueError, AttributeError):
        return None
    outputs = fingerprint.get("outputs") if isinstance(fingerprint, dict) else None
    return outputs if isinstance(outputs, dict) else None


def _same_results(old: Any, new: dict[str, Any]) -> bool:
    """Same weights (and a graph's card), precision, mirror averaging and pixel reading rules make the same labels;
    the model's file name may differ. Same output options (kinds, overlay alpha) make the same files. A manifest
    from before mirror averaging existed ran without it (and one without scales at the image's size alone); one
    from before output options, cards or reading rules were recorded is taken as made with these."""
    return (isinstance(old, dict) and all(old.get(key) == new.get(key) for key in ("sha256", "precision"))
            and old.get("mirror", "off") == new.get("mirror", "off")
            and old.get("scales", "1") == new.get("scales", "1")
            and old.get("card", new.get("card")) == new.get("card")
            and old.get("reading", new.get("reading")) == new.get("reading")
            and old.get("outputs", new.get("outputs")) == new.get("outputs"))


def _describe(fingerprint: Any, other: Any = None) -> str:
    """What made the results; beside `other` (the fingerprint it is compared with), only where they differ."""
    if not isinstance(fingerprint, dict):
        return "an unknown model"
    parts = {"model": f"model {fingerprint.get('model', '?')} (sha256 {str(fingerprint.get('sha256', '?'))[:12]})",
             "precision": f"precision {fingerprint.get('precision', '?')}",
             "mirror": f"mirror {fingerprint.get('mirror', 'off')}",
             "scales": f"scales {fingerprint.get('scales', '1')}",
             "card": f"card (sha256 {str(fingerprint.get('card', '?'))[:12]})",
             "reading": f"pixel reading rules {fingerprint.get('reading', '?')}",
             "outputs": _describe_outputs(fingerprint.get("outputs"))}
    if isinstance(other, dict):
        same = {"model": fingerprint.get("sha256") == other.get("sha256"),
                "precision": fingerprint.get("precision") == other.get("precision"),
                "mirror": fingerprint.get("mirror", "off") == other.get("mirror", "off"),
                "scales": fingerprint.get("scales", "1") == other.get("scales", "1"),
                "card": fingerprint.get("card", other.get("card")) == other.get("card", fingerprint.get("card")),
                "reading": (fingerprint.get("reading", other.get("reading"))
                            == other.get("reading", fingerprint.get("reading"))),
                "outputs": fingerprint.get("outputs", other.get("outputs")) == other.get("outputs")}
        parts = {key: text for key, text in parts.items() if not same[key]} or parts
    return ", ".join(parts.values())


def _describe_outputs(outputs: Any) -> str:
    """'outputs labels, overlay (--alpha 0.5), probs' from a fingerprint's output options."""
    if not isinstance(outputs, dict):
        return "outputs unknown"
    kinds = [str(kind) for kind in outputs.get("kinds", [])]
    if "overlay" in kinds:
        kinds[kinds.index("overlay")] = f"overlay (--alpha {outputs.get('overlay_alpha', '?')})"
    return "outputs " + ", ".join(kinds)


def _output_options_differing(old: Any, new: dict[str, Any]) -> str:
    """When only the output options differ, the options the old results were made with, as the CLI spells them
    ('with --probs', 'with --no-overlay and without --probs'); '' when anything else differs too."""
    old_outputs = old.get("outputs") if isinstance(old, dict) else None
    new_outputs = new.get("outputs")
    if not isinstance(old_outputs, dict) or not isinstance(new_outputs, dict) \
            or not _same_results({**old, "outputs": new_outputs}, new):
        return ""
    old_kinds, new_kinds = set(old_outputs.get("kinds", [])), set(new_outputs.get("kinds", []))
    alpha = old_outputs.get("overlay_alpha", "?")
    options = []
    if "overlay" in old_kinds and "overlay" not in new_kinds:
        options.append(f"with --overlay --alpha {alpha}")
    elif "overlay" in new_kinds and "overlay" not in old_kinds:
        options.append("with --no-overlay")
    elif "overlay" in old_kinds and alpha != new_outputs.get("overlay_alpha"):
        options.append(f"with --alpha {alpha}")
    if ("probs" in old_kinds) != ("probs" in new_kinds):
        options.append("with --probs" if "probs" in old_kinds else "without --probs")
    return " and ".join(options)
