"""The memory timeline as CSV: samples and job marks in one file, read back for `leanseg plot-memory`.

Format (UTF-8): a few `# key: value` lines (device, source, rate_hz, device_total), then a header
`time_s,allocated_bytes,reserved_bytes,peak_allocated_bytes,rss_bytes,engine_live_bytes,mark` and one
row per sample (mark empty) or per mark (byte columns empty), in time order.
"""
from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..io.outputs import atomic_write_bytes

SERIES = ("allocated", "reserved", "peak", "rss", "engine_live")  # snapshot keys besides 'time'
_COLUMNS = ("time_s", "allocated_bytes", "reserved_bytes", "peak_allocated_bytes", "rss_bytes",
            "engine_live_bytes", "mark")


@dataclass(frozen=True)
class MemoryLog:
    """A timeline read back: `series` has 'time' (s, float64) and SERIES (bytes, int64), each of shape (N,)."""

    meta: dict[str, str]  # device, source, rate_hz, device_total
    series: dict[str, np.ndarray]
    marks: list[tuple[float, str]]  # (seconds since start, label), in time order


def write_memory_csv(path: str | Path, series: Mapping[str, np.ndarray], marks: Sequence[tuple[float, str]],
                     meta: Mapping[str, object]) -> Path:
    """Write samples `series` (snapshot dict) and `marks` to `path` atomically; returns the path."""
    text = io.StringIO()
    text.write("# leanseg memory log\n")
    for key, value in meta.items():
        text.write(f"# {key}: {value}\n")
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
    return atomic_write_bytes(path, text.getvalue().encode("utf-8"))


def read_memory_csv(path: str | Path) -> MemoryLog:
    """Read a file written by `write_memory_csv`; ValueError naming the file and line when it is not one."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: cannot read it as a text file ({err})") from None
    meta: dict[str, str] = {}
    body_start = 0
    for body_start, line in enumerate(lines):  # noqa: B007
        if not line.startswith("#"):
            break
        key, _, value = line[1:].partition(":")
        if value:
            meta[key.strip()] = value.strip()
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
