"""`leanseg plot-memory FILE.csv --out FILE.png`: draw a memory timeline written by --memory-log."""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from ..memory.log import MemoryLog, read_memory_csv
from ..plotting import line_chart
from .common import report_error

MAX_LABELLED_MARKS = 30  # beyond this, tile/frame marks are thinned so labels stay legible
_CURVES = (("allocated", "allocated"), ("reserved", "reserved"), ("peak", "peak allocated"), ("rss", "process RSS"),
           ("engine_live", "engine live tensors"))


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("plot-memory", help="draw a --memory-log CSV as a PNG", description=__doc__)
    parser.add_argument("log", type=Path, metavar="FILE.csv", help="a file written by --memory-log")
    parser.add_argument("--out", type=Path, required=True, metavar="FILE.png", help="the PNG to write")
    parser.add_argument("--no-rss", action="store_true", help="leave out the process RSS curve")
    parser.set_defaults(run=run)


def thin_marks(marks: list[tuple[float, str]], limit: int = MAX_LABELLED_MARKS) -> list[tuple[float, str]]:
    """At most about `limit` marks: every start/done/error/empty-cache mark, evenly spaced tiles and frames."""
    if len(marks) <= limit:
        return marks
    repeated = [i for i, (_, label) in enumerate(marks) if label.split(" ")[0] in ("tile", "frame", "image")]
    keep = set(range(len(marks))) - set(repeated)
    room = max(limit - len(keep), 2)
    keep.update(repeated[int(j)] for j in np.linspace(0, len(repeated) - 1, room))
    return [marks[i] for i in sorted(keep)]


def plot_memory_log(log: MemoryLog, out: Path, include_rss: bool = True) -> Path:
    """Draw allocated / reserved / peak (and RSS, engine live when present) in MB against time."""
    times = log.series["time"]
    if times.size == 0:
        raise ValueError("the log has no samples")
    series = {}
    for key, name in _CURVES:
        values = log.series[key]
        if key == "rss" and not include_rss or key == "engine_live" and not values.any():
            continue
        series[name] = (times, values / 1e6)
    device, source = log.meta.get("device", "?"), log.meta.get("source", "?")
    hlines = []
    if "device_total" in log.meta and device.startswith("cuda"):
        hlines.append((int(log.meta["device_total"]) / 1e6, "device memory"))
    return line_chart(series, out, title=f"memory on {device} (source: {source})", x_label="time (s)",
                      y_label="MB", marks=thin_marks(log.marks), hlines=hlines)


def run(args: argparse.Namespace) -> int:
    try:
        log = read_memory_csv(args.log)
        path = plot_memory_log(log, args.out, include_rss=not args.no_rss)
    except ValueError as err:
        return report_error(err if str(args.log) in str(err) else ValueError(f"{args.log}: {err}"))
    print(f"{len(log.series['time'])} samples, {len(log.marks)} marks -> {path}")
    return 0
