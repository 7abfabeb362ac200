"""Reading a batch's manifest the way a person would, without the job's code: snapshot plus journal."""
from __future__ import annotations

import json
from pathlib import Path


def recorded_statuses(out_dir: Path) -> dict[str, str]:
    """source -> status, from manifest.json plus manifest.journal.jsonl (a torn last line is ignored)."""
    records: dict[str, str] = {}
    snapshot = out_dir / "manifest.json"
    if snapshot.exists():
        records.update({k: v["status"] for k, v in json.loads(snapshot.read_text())["images"].items()})
    journal = out_dir / "manifest.journal.jsonl"
    if journal.exists():
        for line in journal.read_text().splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if "record" in entry:
                records[entry["record"]["source"]] = entry["record"]["status"]
    return records


def recorded_ok(out_dir: Path) -> set[str]:
    """Inputs the manifest records as finished ok."""
    return {source for source, status in recorded_statuses(out_dir).items() if status == "ok"}
