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
from ..io.outputs import OutputPathError, atomic_write_bytes, check_output_file
from ..train.dataset import DatasetError, check_label, split_frames
from ..train.frames import sequence_of, unlabelled_note
from ..train.metrics import confusion_matrix, iou_per_class, mean_iou, pixel_accuracy
from . import SUMMARIES
from .common import CommandError, add_inference_options, build_segmenter, report_error
from .progress import ProgressBar


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help=SUMMARIES["eval"], description=__doc__)
    p.add_argument("--data", type=Path, required=True, help="folder with SPLIT.txt or SPLIT/images + SPLIT/labels")
    p.add_argument("--split", default="val", help="default val")
    p.add_argument("--json", type=Path, default=None,
                   help="write the figures to this NAME.json, replacing only an earlier eval's figures "
                   "(default: OUT/eval_SPLIT.json)")
    p.add_argument("--out", type=Path, default=Path("out"), help="folder for the JSON (default out/)")
    p.add_argument("--per-sequence", action="store_true",
                   help="also report each sequence (frame-name prefix before the first '_') on its own")
    add_inference_options(p, mirror="flip")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    target = args.json or args.out / f"eval_{args.split}.json"
    try:
        if args.json:
            check_output_file(target, f"--json {target}:",
                              f"{target} is a folder; give --json a file name such as {target / 'eval.json'}")
            if target.suffix.lower() != ".json":
                raise CommandError(f"--json {target}: the figures are JSON; give a name ending in .json")
        else:
            check_output_file(target, "--out", f"{target} is a folder; move it or give --json a file name")
        if target.is_file() and not _written_by_eval(target):
            raise CommandError(f"{target}: already exists and is not a `leanseg eval` result, so it is not "
                               "replaced; give --json another name")
        split = split_frames(args.data, args.split)  # every file checked to exist before the model loads
        pairs = split.pairs
        if note := unlabelled_note(split.unlabelled):
            print(f"warning: {note}; they are not scored", file=sys.stderr)
        segmenter = build_segmenter(args)
    except (CommandError, DatasetError, OutputPathError) as err:
        return report_error(err)
    info = segmenter.info
    k = info.config.num_classes
    matrix = np.zeros((k, k), np.int64)
    by_sequence: dict[str, np.ndarray] = {}
    frames: dict[str, int] = {}
    bar = ProgressBar(len(pairs), f"eval {args.split}", unit="img")
    started = time.perf_counter()
    warned = False
    for image_path, label_path in pairs:
        try:
            truth = read_image(label_path).pixels
            image = read_image(image_path)
            check_label(truth, label_path, image.pixels.shape, image_path)
            result = segmenter.segment(image)
        except (ImageReadError, DatasetError) as err:
            bar.close()
            return report_error(err)
        if not warned and int(truth.max()) >= k:
            warned = _warn_unknown_labels(truth, label_path, k, info.ignore_index, bar)
        frame_matrix = confusion_matrix(truth, result.labels, k)
        matrix += frame_matrix
        sequence = sequence_of(image_path)
        by_sequence[sequence] = by_sequence.get(sequence, np.zeros((k, k), np.int64)) + frame_matrix
        frames[sequence] = frames.get(sequence, 0) + 1
        bar.update()
    bar.close()
    if not matrix.sum():
        return report_error(CommandError(
            f"{args.data}, split {args.split}: no pixel could be scored: every label value is outside the model's "
            f"{k} classes{'' if info.ignore_index is None else f' or is the ignore index {info.ignore_index}'}; "
            f"nothing written"))
    ious = iou_per_class(matrix)
    width = max(len("pixel accuracy"), *(len(n) for n in info.class_names))
    print(f"| {'class'.ljust(width)} | IoU    |\n| {'-' * width} | ------ |")
    for name, iou in zip(info.class_names, ious):
        print(f"| {name.ljust(width)} | {_figure(iou)} |")
    miou, accuracy = mean_iou(matrix), _pixel_accuracy(matrix)
    print(f"| {'mean IoU'.ljust(width)} | {_figure(miou)} |\n| {'pixel accuracy'.ljust(width)} | {_figure(accuracy)} |")
    payload = {
        "model": str(segmenter.loaded.path), "data": str(args.data), "split": args.split, "images": len(pairs),
        "engine": args.engine, "precision": args.precision, "mirror": segmenter.options.mirror,
        "scales": list(segmenter.options.scales), "seconds": time.perf_counter() - started,
        "per_class_iou": {n: _json_figure(v) for n, v in zip(info.class_names, ious)},
        "mean_iou": _json_figure(miou), "pixel_accuracy": _json_figure(accuracy), "confusion_matrix": matrix.tolist(),
    }
    if args.per_sequence:
        payload["per_sequence"] = _per_sequence(by_sequence, frames, info.class_names)
    try:
        atomic_write_bytes(target, json.dumps(payload, indent=1).encode())
    except OutputPathError as err:  # checked at the start; the folder changed since
        return report_error(err)
    print(f"written {target}", file=sys.stderr)
    return 0


def _written_by_eval(path: Path) -> bool:
    """Whether the existing file `path` holds figures an earlier `leanseg eval` wrote (safe to replace)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(data, dict) and {"split", "mean_iou", "confusion_matrix"} <= data.keys()


def _warn_unknown_labels(truth: np.ndarray, label_path: Path, k: int, ignore_index: int | None,
                         bar: ProgressBar) -> bool:
    """Warn (stderr) when `truth` holds values past the model's `k` classes other than the ignore index: they
    count nowhere, so a model of other classes than the labels' scores quietly low. Returns whether it warned."""
    values = sorted(set(np.unique(truth[truth >= k]).tolist()) - {ignore_index})
    if not values:
        return False
    shown = f"{values[0]}..{values[-1]}" if len(values) > 2 and values[-1] - values[0] == len(values) - 1 \
        else ", ".join(str(v) for v in values)
    hint = ("; a 0/255 mask? a binary net's labels are 0 and 1: save the masks with 1 for the class"
            if k == 2 and values == [255] else "")
    bar.print_above(f"warning: labels hold values {shown} the model does not have (its {k} classes: 0..{k - 1}), "
                    f"e.g. {label_path}; they are left out of the figures: is this the model for these labels?"
                    f"{hint}", sys.stderr)
    return True


def _pixel_accuracy(matrix: np.ndarray) -> float:
    """The share of labelled pixels predicted right; NaN when no pixel is labelled (every label ignored)."""
    return pixel_accuracy(matrix) if matrix.sum() else float("nan")


def _figure(value: float, width: int = 6) -> str:
    """A table cell: `value` to 4 places, or n/a (NaN: a class absent from both labels and predictions, or no
    labelled pixel)."""
    return "n/a".ljust(width) if np.isnan(value) else f"{value:.4f}".ljust(width)


def _json_figure(value: float) -> float | None:
    """`value` for the JSON: null for NaN (a class absent from both labels and predictions, or no labelled
    pixel), which JSON lacks."""
    return None if np.isnan(value) else float(value)


def _per_sequence(matrices: dict[str, np.ndarray], frames: dict[str, int], class_names: tuple[str, ...]) -> dict:
    """Print a table of each sequence's figures and return them for the JSON."""
    print("\n| sequence | frames | mean IoU | pixel accuracy |\n| -------- | ------ | -------- | -------------- |")
    figures = {}
    for sequence in sorted(matrices):
        matrix = matrices[sequence]
        ious = iou_per_class(matrix)
        miou, accuracy = mean_iou(matrix), _pixel_accuracy(matrix)
        figures[sequence] = {
            "images": frames[sequence], "mean_iou": _json_figure(miou), "pixel_accuracy": _json_figure(accuracy),
            "per_class_iou": {n: _json_figure(v) for n, v in zip(class_names, ious)},
        }
        print(f"| {sequence:<8} | {frames[sequence]:>6} | {_figure(miou, 8)} | {_figure(accuracy, 14)} |")
    return figures
