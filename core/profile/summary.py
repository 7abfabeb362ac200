"""Plain-text summary of a lab run: failures, profile against measurement, engine against the bounds."""
from __future__ import annotations

from ..memory import format_bytes
from .lab import LabResult, row_line


def summary_lines(result: LabResult) -> list[str]:
    """Rows that failed, the profile against the measurement, and the engine against the bounds."""
    lines = [row_line(r) for r in result.rows if "error" in r]
    if result.profile_error:
        return lines + [f"profile failed: {result.profile_error}"]
    for profile, name in ((result.eager, "eval no_grad"), (result.engine, "engine fp32")):
        if profile is None or profile.peak_step is None:
            continue
        text = f"{profile.mode} profile peak {format_bytes(profile.peak_bytes)} at {profile.peak_step.layer}"
        row = result.row(name)
        if row is not None and "error" not in row and row["peak_bytes"] > 0:
            error = profile.peak_bytes / row["peak_bytes"] - 1
            text += f"; measured {name} {format_bytes(row['peak_bytes'])} ({error:+.0%})"
        lines.append(text)
    if result.bounds is not None and result.engine is not None:
        whole, pieces = result.bounds.whole_bytes, result.bounds.pieces_bytes
        lines.append(f"lower bounds: blocks whole {format_bytes(whole)}, in pieces {format_bytes(pieces)}; "
                     f"engine = {result.engine.peak_bytes / max(1, pieces):.2f} × the bound in pieces")
    return lines
