"""Screen: does normalising with each image's own batch-norm statistics help on a sequence never seen?

Test-time adaptation in its simplest form (AdaBN): every batch-norm layer's mean and variance are blended
toward the image's own, `(1 - a) * running + a * image`, one image at a time. Scored on every second frame of
the held-out split, without mirror averaging, for each `a` given (0 is the plain model).

    .venv/bin/python scripts/screen_image_bn_stats.py --data /tmp/ev \
        --model runs/fold-0016E5-80r40ff/best.safetensors --split 0016E5 --alphas 0 0.1 0.3 0.5 1
"""
from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from leanseg.core.io.images import read_image
from leanseg.core.model.checkpoint import load_checkpoint
from leanseg.core.train.batches import to_batch
from leanseg.core.train.dataset import DatasetSpec, find_pairs
from leanseg.core.train.metrics import confusion_matrix, mean_iou


def blended_batch_norm(layer: torch.nn.BatchNorm2d, alpha: list[float]) -> Callable[[torch.Tensor], torch.Tensor]:
    """A forward for `layer` whose statistics are blended toward the input's by `alpha[0]`."""
    def forward(x: torch.Tensor) -> torch.Tensor:
        mean, var, a = layer.running_mean, layer.running_var, alpha[0]
        if a > 0:
            mean = (1 - a) * mean + a * x.float().mean((0, 2, 3))
            var = (1 - a) * var + a * x.float().var((0, 2, 3), unbiased=False)
        return F.batch_norm(x, mean, var, layer.weight, layer.bias, False, 0.0, layer.eps)
    return forward


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--split", required=True)
    parser.add_argument("--alphas", type=float, nargs="+", default=[0.0, 0.1, 0.3, 0.5, 1.0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("out/screens/image_bn_stats.json"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    loaded = load_checkpoint(args.model)
    info = loaded.info
    spec = DatasetSpec(class_names=info.class_names, class_colours=info.class_colours,
                       ignore_index=info.ignore_index)
    model = loaded.model.eval()
    alpha = [0.0]  # read by every layer's forward
    for layer in model.modules():
        if isinstance(layer, torch.nn.BatchNorm2d):
            layer.forward = blended_batch_norm(layer, alpha)  # type: ignore[method-assign]
    k = info.config.num_classes
    matrices = {a: np.zeros((k, k), np.int64) for a in args.alphas}
    with torch.inference_mode():
        for image_path, label_path in find_pairs(args.data, args.split, spec)[::2]:
            x = to_batch([read_image(image_path).pixels], torch.device("cpu"))
            truth = read_image(label_path).pixels
            for a in args.alphas:
                alpha[0] = a
                labels = model(x)[0].argmax(0).to(torch.uint8).numpy()
                matrices[a] += confusion_matrix(truth, labels, k)
    print(f"| a | {args.split} mIoU |\n| --- | --- |")
    for a, matrix in matrices.items():
        print(f"| {a:g} | {mean_iou(matrix):.4f} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"model": args.model, "split": args.split,
                                    "mean_iou": {str(a): mean_iou(m) for a, m in matrices.items()}}, indent=1))
    print("written", args.out)


if __name__ == "__main__":
    main()
