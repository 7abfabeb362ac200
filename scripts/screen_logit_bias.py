"""Screen: do per-class logit biases fitted on one held-out sequence carry over to another?

A bias added to each class's logit moves the argmax toward the classes a fold model under-predicts on frames
it never saw. This fits one (coordinate ascent on the mean IoU, every third labelled pixel) on the first
(model, split) pair's mirror-averaged logits and scores it on each pair: a gain only on the pair it was
fitted on is that sequence's shift, not something to ship in the weights.

    .venv/bin/python scripts/screen_logit_bias.py --data /tmp/ev \
        runs/fold-0016E5-80r40ff/best.safetensors:0016E5 runs/fold-0006R0-ctx-r40ff/best.safetensors:0006R0

(`--data` holds the held-out sequences' list files, `SEQ.txt`, beside CamVid's folders.) Logits are kept at
every second pixel in float16, which is why the unbiased scores differ from `leanseg eval`'s in the third place.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from leanseg.core.engine.mirror import mirror_runner
from leanseg.core.io.images import read_image
from leanseg.core.model.checkpoint import load_checkpoint
from leanseg.core.train.batches import to_batch
from leanseg.core.train.dataset import DatasetSpec, find_pairs

STEPS = np.arange(-1.0, 1.01, 0.1)  # tried around the current bias of each class, each round


def held_out_logits(model_path: str, data: Path, split: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(pixels, K) mirror-averaged logits and (pixels,) labels of `split`, void pixels dropped."""
    loaded = load_checkpoint(model_path)
    info = loaded.info
    spec = DatasetSpec(class_names=info.class_names, class_colours=info.class_colours,
                       ignore_index=info.ignore_index)
    logits, labels = [], []
    model = loaded.model.eval()
    with torch.inference_mode():
        for image_path, label_path in find_pairs(data, split, spec):
            x = to_batch([read_image(image_path).pixels], torch.device("cpu"))
            averaged = mirror_runner(model, "logits")(x)[0]
            logits.append(averaged[:, ::2, ::2].half().permute(1, 2, 0).reshape(-1, averaged.shape[0]))
            labels.append(torch.from_numpy(read_image(label_path).pixels[::2, ::2].astype(np.int64)).reshape(-1))
    flat, truth = torch.cat(logits).float(), torch.cat(labels)
    keep = truth < flat.shape[1]
    return flat[keep], truth[keep]


def mean_iou(logits: torch.Tensor, truth: torch.Tensor, bias: torch.Tensor) -> float:
    k = logits.shape[1]
    matrix = torch.bincount(truth * k + (logits + bias).argmax(1), minlength=k * k).reshape(k, k).double()
    return (matrix.diag() / (matrix.sum(0) + matrix.sum(1) - matrix.diag())).mean().item()


def fit_bias(logits: torch.Tensor, truth: torch.Tensor, rounds: int = 3) -> torch.Tensor:
    sample = torch.arange(0, len(truth), 3)
    logits, truth = logits[sample], truth[sample]
    bias = torch.zeros(logits.shape[1])
    best = mean_iou(logits, truth, bias)
    for _ in range(rounds):
        for k in range(len(bias)):
            start = bias[k].item()
            for step in STEPS:
                trial = bias.clone()
                trial[k] = start + step
                score = mean_iou(logits, truth, trial)
                if score > best + 1e-5:
                    best, bias = score, trial
    return bias


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pairs", nargs="+", help="MODEL:SPLIT; the bias is fitted on the first")
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("out/screens/logit_bias.json"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    scored = []
    for pair in args.pairs:
        model_path, split = pair.rsplit(":", 1)
        scored.append((pair, *held_out_logits(model_path, args.data, split)))
    bias = fit_bias(*scored[0][1:])
    print("bias fitted on", args.pairs[0], [round(v, 2) for v in bias.tolist()])
    rows = []
    print("| model:split | no bias | with the bias |\n| --- | --- | --- |")
    for pair, logits, truth in scored:
        row = {"pair": pair, "no_bias": mean_iou(logits, truth, torch.zeros_like(bias)),
               "with_bias": mean_iou(logits, truth, bias)}
        rows.append(row)
        print(f"| {pair} | {row['no_bias']:.4f} | {row['with_bias']:.4f} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"fitted_on": args.pairs[0], "bias": bias.tolist(), "rows": rows}, indent=1))
    print("written", args.out)


if __name__ == "__main__":
    main()
