"""`leanseg plot-memory FILE.csv --out FILE.png`: draw a memory timeline written by --memory-log.

The chart's type follows --out's suffix (.png, .svg or .pdf), or --format when given."""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from ..memory import plot_mark_label
from ..memory.log import MemoryLog, read_memory_csv
from ..plotting import CHART_FORMATS, drawn_by_leanseg
from . import SUMMARIES
from .common import report_error
from .options import HELP_FORMATTER

MAX_LABELLED_MARKS = 30  # beyond this, tile/frame marks are thinned so labels stay legible
_CURVES = (("allocated", "allocated"), ("reserved", "reserved"), ("peak", "peak allocated"), ("rss", "process RSS"),
           ("engine_live", "engine live tensors"))


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("plot-memory", help=SUMMARIES["plot-memory"],
                            description=__doc__, formatter_class=HELP_FORMATTER)
    parser.add_argument("log", type=Path, metavar="FILE.csv", help="a file written by --memory-log")
    parser.add_argument("--out", type=Path, required=True, metavar="FILE.png",
                        help="the chart to write: FILE.png, FILE.svg or FILE.pdf")
    parser.add_argument("--format", choices=CHART_FORMATS, default=None,
                        help="chart type; default: --out's suffix, png when it has none (then added)")
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
    from ..plotting import line_chart  # matplotlib loads only when a chart is drawn

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
    marks = [(time, plot_mark_label(label)) for time, label in thin_marks(log.marks)]  # 'error 3/10': 'failed 3/10'
    return line_chart(series, out, title=f"memory on {device} (source: {source})", x_label="time (s)",
                      y_label="MB", marks=marks, hlines=hlines)


def output_path(out: Path, chart_type: str | None) -> Path:
    """--out, with `chart_type`'s suffix (.png without --format) added when it has none; ValueError when the two
    disagree."""
    suffix = out.suffix.lower().lstrip(".")
    if not suffix:
        return out.with_suffix(f".{chart_type or 'png'}")
    if chart_type is None:
        return out
    if suffix != chart_type:
        raise ValueError(f"--out {out} ends in .{suffix} but --format is {chart_type}; make them agree")
    return out


def run(args: argparse.Namespace) -> int:
    try:
        out = output_path(args.out, args.format)
        if out.is_file() and not drawn_by_leanseg(out):
            raise ValueError(f"{out}: already exists and is not a chart leanseg drew, so it is not replaced; choose "
                             "another --out")
        log = read_memory_csv(args.log)
        path = plot_memory_log(log, out, include_rss=not args.no_rss)
    except ValueError as err:
        return report_error(err if str(args.log) in str(err) or str(args.out) in str(err)
                            else ValueError(f"{args.log}: {err}"))
    print(f"{len(log.series['time'])} samples, {len(log.marks)} marks -> {path}")
    return 0
