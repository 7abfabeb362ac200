"""Uniform average of leanseg checkpoints of one architecture (a "model soup", Wortsman et al. 2022).

    .venv/bin/python scripts/average_weights.py OUT.safetensors A.safetensors B.safetensors [...]

Float tensors (weights and batch-norm statistics) are averaged, integer ones (batch counts) taken from the
first file, and OUT keeps the first file's metadata. Used for the soups in docs/model.md.
"""
from __future__ import annotations

import sys

import torch
from safetensors import safe_open
from safetensors.torch import save_file


def average(inputs: list[str]) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    sums: dict[str, torch.Tensor] = {}
    metadata: dict[str, str] = {}
    for index, path in enumerate(inputs):
        with safe_open(path, "pt") as handle:
            if index == 0:
                metadata = handle.metadata() or {}
            for key in handle.keys():
                tensor = handle.get_tensor(key)
                if tensor.is_floating_point():
                    sums[key] = sums.get(key, torch.zeros_like(tensor, dtype=torch.float64)) + tensor.double()
                else:
                    sums.setdefault(key, tensor)
    return {key: (t / len(inputs)).float() if t.is_floating_point() else t for key, t in sums.items()}, metadata


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    out, *inputs = argv
    tensors, metadata = average(inputs)
    save_file({key: t.contiguous() for key, t in tensors.items()}, out, metadata=metadata)
    print(f"wrote {out}: the average of {len(inputs)} checkpoints")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
