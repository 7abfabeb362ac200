"""Export a lab result: JSON, and charts (peak and time per configuration, live bytes per step) as PNG or SVG."""
from __future__ import annotations

from pathlib import Path

from ..memory import format_bytes
from ..plotting import bar_chart, line_chart
from .lab import LabResult
from .records import MemoryProfile, write_json

MB = 1e6


def bound_lines(result: LabResult) -> list[tuple[float, str]]:
    """(MB, label) for the lower bounds, for charts."""
    if result.bounds is None:
        return []
    whole, pieces = result.bounds.whole_bytes, result.bounds.pieces_bytes
    return [(whole / MB, f"lower bound, blocks whole {format_bytes(whole)}"),
            (pieces / MB, f"lower bound, in pieces {format_bytes(pieces)}")]


def step_series(profile: MemoryProfile) -> tuple[list[float], list[float]]:
    """(step index, peak MB while it ran) for each step."""
    return [float(s.index) for s in profile.steps], [s.peak_bytes / MB for s in profile.steps]


def write_lab(result: LabResult, out_dir: str | Path, stem: str = "memory_lab",
              chart_format: str = "png") -> list[Path]:
    """JSON plus up to three charts (`chart_format`: png, svg or pdf) in `out_dir`; returns the paths written."""
    out = Path(out_dir)
    title = f"{result.model}, {result.size}x{result.size}, {result.device}"
    written = [write_json(out / f"{stem}.json", result.to_dict())]
    good = [r for r in result.rows if "error" not in r]
    if good:  # bars run across, one row per configuration, so long names never overlap
        written.append(bar_chart({r["name"]: r["peak_bytes"] / MB for r in good},
                                 out / f"{stem}_peak.{chart_format}", title=f"Peak memory above baseline: {title}",
                                 y_label="MB", hlines=bound_lines(result), size=(1280, 600),
                                 value_format=lambda v: f"{v:.0f}", horizontal=True))
        written.append(bar_chart({r["name"]: r["seconds"] for r in good}, out / f"{stem}_time.{chart_format}",
                                 title=f"Time per run (median): {title}", y_label="seconds", size=(1280, 600),
                                 value_format=lambda v: f"{v:.3g}", horizontal=True))
    profiles = [p for p in (result.eager, result.engine) if p is not None]
    if profiles:
        series = {f"{p.mode} ({p.dtype})": step_series(p) for p in profiles}
        marks = []
        for p in profiles:
            peak = p.peak_step
            if peak is not None:
                marks.append((float(peak.index), f"{p.mode} peak {peak.peak_bytes / MB:.0f} MB: {peak.layer}"))
        written.append(line_chart(series, out / f"{stem}_steps.{chart_format}",
                                  title=f"Bytes held at each step: {title}", x_label="step (graph node)",
                                  y_label="MB", marks=marks, hlines=bound_lines(result), size=(1280, 600)))
    return written
