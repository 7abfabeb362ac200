"""`leanseg eval --data DIR --split val [--model PATH] [--per-sequence]`: per-class IoU, mean IoU, pixel
accuracy; with --per-sequence also each sequence's (frame-name prefix before the first `_`)."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from ..io.images import ImageReadError, read_image
from ..train.dataset import DatasetError, find_pairs
from ..train.frames import sequence_of
from ..train.metrics import confusion_matrix, iou_per_class, mean_iou, pixel_accuracy
from . import SUMMARIES
from .common import CommandError, add_inference_options, build_segmenter, report_error
from .progress import ProgressBar


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help=SUMMARIES["eval"], description=__doc__)
    p.add_argument("--data", type=Path, required=True, help="folder with SPLIT.txt or SPLIT/images + SPLIT/labels")
    p.add_argument("--split", default="val", help="default val")
    p.add_argument("--json", type=Path, default=None, help="write the figures here (default: OUT/eval_SPLIT.json)")
    p.add_argument("--out", type=Path, default=Path("out"), help="folder for the JSON (default out/)")
    p.add_argument("--per-sequence", action="store_true",
                   help="also report each sequence (frame-name prefix before the first '_') on its own")
    add_inference_options(p, mirror="flip")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        segmenter = build_segmenter(args)
        info = segmenter.info
        from ..train.dataset import DatasetSpec

        spec = DatasetSpec(class_names=info.class_names, class_colours=info.class_colours,
                           ignore_index=info.ignore_index)
        pairs = find_pairs(args.data, args.split, spec)
    except (CommandError, DatasetError) as err:
        return report_error(err)
    k = info.config.num_classes
    matrix = np.zeros((k, k), np.int64)
    by_sequence: dict[str, np.ndarray] = {}
    frames: dict[str, int] = {}
    bar = ProgressBar(len(pairs), f"eval {args.split}", unit="img")
    started = time.perf_counter()
    for image_path, label_path in pairs:
        try:
            truth = read_image(label_path).pixels
            result = segmenter.segment(read_image(image_path))
        except ImageReadError as err:
            return report_error(err)
        if truth.shape != result.labels.shape:
            return report_error(ValueError(f"{label_path}: size {truth.shape} differs from its image"))
        frame_matrix = confusion_matrix(truth, result.labels, k)
        matrix += frame_matrix
        sequence = sequence_of(image_path)
        by_sequence[sequence] = by_sequence.get(sequence, np.zeros((k, k), np.int64)) + frame_matrix
        frames[sequence] = frames.get(sequence, 0) + 1
        bar.update()
    bar.close()
    ious = iou_per_class(matrix)
    width = max(len("pixel accuracy"), *(len(n) for n in info.class_names))
    print(f"| {'class'.ljust(width)} | IoU    |\n| {'-' * width} | ------ |")
    for name, iou in zip(info.class_names, ious):
        print(f"| {name.ljust(width)} | {iou:.4f} |")
    miou, accuracy = mean_iou(matrix), pixel_accuracy(matrix)
    print(f"| {'mean IoU'.ljust(width)} | {miou:.4f} |\n| {'pixel accuracy'.ljust(width)} | {accuracy:.4f} |")
    payload = {
        "model": str(segmenter.loaded.path), "data": str(args.data), "split": args.split, "images": len(pairs),
        "engine": args.engine, "precision": args.precision, "mirror": segmenter.options.mirror,
        "scales": list(segmenter.options.scales), "seconds": time.perf_counter() - started,
        "per_class_iou": {n: (None if np.isnan(v) else float(v)) for n, v in zip(info.class_names, ious)},
        "mean_iou": miou, "pixel_accuracy": accuracy, "confusion_matrix": matrix.tolist(),
    }
    if args.per_sequence:
        payload["per_sequence"] = _per_sequence(by_sequence, frames, info.class_names)
    target = args.json or args.out / f"eval_{args.split}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(payload, indent=1))
    print(f"written {target}", file=sys.stderr)
    return 0


def _per_sequence(matrices: dict[str, np.ndarray], frames: dict[str, int], class_names: tuple[str, ...]) -> dict:
    """Print a table of each sequence's figures and return them for the JSON."""
    print("\n| sequence | frames | mean IoU | pixel accuracy |\n| -------- | ------ | -------- | -------------- |")
    figures = {}
    for sequence in sorted(matrices):
        matrix = matrices[sequence]
        ious = iou_per_class(matrix)
        figures[sequence] = {
            "images": frames[sequence], "mean_iou": mean_iou(matrix), "pixel_accuracy": pixel_accuracy(matrix),
            "per_class_iou": {n: (None if np.isnan(v) else float(v)) for n, v in zip(class_names, ious)},
        }
        print(f"| {sequence:<8} | {frames[sequence]:>6} | {figures[sequence]['mean_iou']:.4f}   | "
              f"{figures[sequence]['pixel_accuracy']:.4f}         |")
    return figures
