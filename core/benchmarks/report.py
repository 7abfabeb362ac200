"""Print benchmark rows as an aligned table and save them as JSON."""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def format_table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    """Rows of dicts -> a Markdown table with the given columns (missing cells are '-')."""
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) if cells else len(c) for i, c in enumerate(columns)]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(columns, widths)) + " |",
             "| " + " | ".join("-" * w for w in widths) + " |"]
    lines += ["| " + " | ".join(v.ljust(w) for v, w in zip(r, widths)) + " |" for r in cells]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"
    return str(value)


def verdict(ok: bool) -> str:
    """How a summary line says whether a figure reached its target."""
    return "met" if ok else "MISSED"


def write_json(path: str | Path, payload: Any) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2))
    return path
