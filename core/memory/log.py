"""The memory timeline as a plain CSV plus a JSON sidecar, read back for `leanseg plot-memory`.

`NAME.csv` (UTF-8) has exactly one header row,
`time_s,allocated_bytes,reserved_bytes,peak_allocated_bytes,rss_bytes,engine_live_bytes,mark`, then one
row per sample (mark empty) or per job mark (byte columns empty), in time order, so `csv.DictReader`,
pandas and spreadsheets open it as it is. `NAME.json` beside it holds what the numbers are about
(device, source, rate_hz, device_total) and a description of each column. Logs written before the
sidecar existed (leading `# key: value` lines) are still read.
"""
from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..io.outputs import atomic_write_bytes

SERIES = ("allocated", "reserved", "peak", "rss", "engine_live")  # snapshot keys besides 'time'
_COLUMNS = ("time_s", "allocated_bytes", "reserved_bytes", "peak_allocated_bytes", "rss_bytes",
            "engine_live_bytes", "mark")
FORMAT_NAME = "leanseg memory log"
FORMAT_VERSION = 2  # 1: metadata in leading '#' lines of the CSV; 2: plain CSV + JSON sidecar
COLUMN_NOTES = {
    "time_s": "seconds since the monitor started",
    "allocated_bytes": "bytes held by live tensors (CUDA) or by the heap in use (CPU)",
    "reserved_bytes": "bytes the allocator keeps from the system, in use or cached",
    "peak_allocated_bytes": "highest allocated_bytes since the last peak reset",
    "rss_bytes": "resident set size of the whole process",
    "engine_live_bytes": "bytes of tensors the lean engine holds alive (0 when it is not running)",
    "mark": "a job event (start, tile i/n, image, frame, done, error); byte columns are empty on these rows",
}


@dataclass(frozen=True)
class MemoryLog:
    """A timeline read back: `series` has 'time' (s, float64) and SERIES (bytes, int64), each of shape (N,)."""

    meta: dict[str, str]  # device, source, rate_hz, device_total
    series: dict[str, np.ndarray]
    marks: list[tuple[float, str]]  # (seconds since start, label), in time order


def sidecar_path(path: str | Path) -> Path:
    """`NAME.json` beside `NAME.csv` (`NAME.csv.json` when the log itself ends in .json)."""
    path = Path(path)
    return path.with_name(path.name + ".json") if path.suffix.lower() == ".json" else path.with_suffix(".json")


def written_as_memory_log(path: str | Path) -> bool:
    """Whether the existing file `path` is a memory log (its CSV, either version) or a memory log's JSON sidecar:
    what `--memory-log` may replace. Reads at most the first 64 KiB."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(1 << 16).decode("utf-8", errors="replace")
    except OSError:
        return False
    if head.lstrip().startswith("{"):  # a sidecar: a JSON object naming the format
        try:
            return json.loads(Path(path).read_text(encoding="utf-8")).get("format") == FORMAT_NAME
        except (OSError, UnicodeDecodeError, ValueError, AttributeError):
            return False
    lines = [line for line in head.splitlines() if not line.startswith("#")]  # version 1: '#' lines first
    return bool(lines) and tuple(lines[0].split(",")) == _COLUMNS


def write_memory_csv(path: str | Path, series: Mapping[str, np.ndarray], marks: Sequence[tuple[float, str]],
                     meta: Mapping[str, object]) -> Path:
    """Write samples `series` (snapshot dict) and `marks` to `path` and `meta` to its JSON sidecar, atomically."""
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(_COLUMNS)
    rows: list[tuple[float, int, list[str]]] = []
    times = np.asarray(series["time"], np.float64)
    values = [np.asarray(series[name], np.int64) for name in SERIES]
    for i, t in enumerate(times):
        rows.append((float(t), 0, [f"{t:.4f}", *(str(int(v[i])) for v in values), ""]))
    for t, label in marks:
        rows.append((float(t), 1, [f"{t:.4f}", *([""] * len(SERIES)), label]))
    rows.sort(key=lambda row: (row[0], row[1]))
    writer.writerows(row for _, _, row in rows)
    path = Path(path)
    sidecar = {"format": FORMAT_NAME, "version": FORMAT_VERSION, "csv": path.name,
               **{key: value for key, value in meta.items()}, "columns": COLUMN_NOTES}
    atomic_write_bytes(sidecar_path(path), (json.dumps(sidecar, indent=2, default=str) + "\n").encode("utf-8"))
    return atomic_write_bytes(path, text.getvalue().encode("utf-8"))


def read_memory_csv(path: str | Path) -> MemoryLog:
    """Read a file written by `write_memory_csv` (or an older one); ValueError naming the file and line."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: cannot read it as a text file ({err})") from None
    meta: dict[str, str] = {}
    body_start = 0
    for body_start, line in enumerate(lines):  # noqa: B007  (version 1: '# key: value' lines first)
        if not line.startswith("#"):
            break
        key, _, value = line[1:].partition(":")
        if value:
            meta[key.strip()] = value.strip()
    meta.update(_read_sidecar(path))
    reader = csv.reader(lines[body_start:])
    header = next(reader, None)
    if header is None or tuple(header) != _COLUMNS:
        raise ValueError(f"{path}: not a leanseg memory log (expected the header {','.join(_COLUMNS)}, "
                         f"got {','.join(header) if header else 'nothing'}); write one with --memory-log")
    times: list[float] = []
    columns: list[list[int]] = [[] for _ in SERIES]
    marks: list[tuple[float, str]] = []
    for line_no, row in enumerate(reader, start=body_start + 2):
        try:
            if len(row) != len(_COLUMNS):
                raise ValueError(f"{len(row)} fields, expected {len(_COLUMNS)}")
            t = float(row[0])
            if row[-1] and not any(row[1:-1]):
                marks.append((t, row[-1]))
                continue
            numbers = [int(field) for field in row[1:-1]]
        except ValueError as err:
            raise ValueError(f"{path}, line {line_no}: {err}") from None
        times.append(t)
        for column, number in zip(columns, numbers):
            column.append(number)
    series: dict[str, np.ndarray] = {"time": np.asarray(times, np.float64)}
    series.update({name: np.asarray(column, np.int64) for name, column in zip(SERIES, columns)})
    return MemoryLog(meta, series, marks)


def _read_sidecar(path: Path) -> dict[str, str]:
    """The sidecar's metadata as strings (not 'format', 'version', 'csv', 'columns'); {} when there is none."""
    sidecar = sidecar_path(path)
    if not sidecar.is_file():
        return {}
    try:
        data = json.loads(sidecar.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{sidecar}: cannot read the memory log's metadata ({err})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT_NAME:
        return {}  # some other NAME.json beside the CSV: not ours, so not an error
    return {str(key): str(value) for key, value in data.items() if key not in ("format", "version", "csv", "columns")}
