"""Uniform average of leanseg checkpoints of one architecture (a "model soup", Wortsman et al. 2022).

    .venv/bin/python scripts/average_weights.py OUT.safetensors A.safetensors B.safetensors [...]

Float tensors (weights and batch-norm statistics) are averaged, integer ones (batch counts) taken from the
first file. OUT keeps the first file's class names, colours and normalisation; its provenance records this
command and each input's name, SHA-256 and provenance (`leanseg.core.train.soup`). Used for the soups in
docs/model.md and for the default model.
"""
from __future__ import annotations

import shlex
import sys

from leanseg.core.model.checkpoint import CheckpointError, save_checkpoint
from leanseg.core.train.soup import average_checkpoints


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    out, *inputs = argv
    command = shlex.join(["python", "scripts/average_weights.py", *argv])
    try:
        soup = average_checkpoints(inputs, command=command)
    except (CheckpointError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    save_checkpoint(out, soup.model, soup.info)
    print(f"wrote {out}: the average of {len(inputs)} checkpoints")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
