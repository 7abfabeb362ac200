"""Copy a leanseg checkpoint with figures measured after training added to its provenance (how the default model
ships: the run's weights, and the held-out-sequence figures that chose its recipe, in one file).

    .venv/bin/python scripts/record_model_figures.py RUN.safetensors OUT.safetensors FIGURES.json

FIGURES.json is a JSON object; its keys are added to the provenance beside the run's own (command, data, split,
epochs), and `copied_from` records RUN's path and SHA-256. The tensors are RUN's, unchanged. OUT is written
atomically and may not be RUN itself; a key the run's provenance already has is refused, not overwritten.
"""
from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import replace
from pathlib import Path

from leanseg.core.model.checkpoint import CheckpointError, load_checkpoint, save_checkpoint


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    source, out, figures_path = (Path(arg) for arg in argv)
    if out.exists() and out.resolve() == source.resolve():
        print(f"error: {out} is the run's own file; write the copy elsewhere", file=sys.stderr)
        return 1
    try:
        figures = json.loads(figures_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        print(f"error: {figures_path}: not a JSON file ({err})", file=sys.stderr)
        return 1
    if not isinstance(figures, dict):
        print(f"error: {figures_path}: figures must be a JSON object, got {type(figures).__name__}", file=sys.stderr)
        return 1
    try:
        loaded = load_checkpoint(source)
    except (OSError, CheckpointError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    clashes = sorted(set(figures) & (set(loaded.info.provenance) | {"copied_from"}))  # the copy's own key
    if clashes:
        print(f"error: {figures_path}: {', '.join(clashes)} already in {source}'s provenance (or the copy's own)",
              file=sys.stderr)
        return 1
    provenance = {**loaded.info.provenance, **figures,
                  "copied_from": {"file": str(source), "sha256": hashlib.sha256(source.read_bytes()).hexdigest()}}
    save_checkpoint(out, loaded.model, replace(loaded.info, provenance=provenance))
    print(f"wrote {out}: {source}'s weights with {', '.join(sorted(figures))} in its provenance")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
