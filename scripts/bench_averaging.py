"""What test-time averaging costs: seconds per image for one pass, mirror averaging, multi-scale averaging and
both, with the same model, engine and threads, measured side by side (rounds interleaved, median per setting).

    .venv/bin/python scripts/bench_averaging.py --rounds 8 --threads 1 --out out/bench/averaging.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from leanseg.core.assets import default_model_path
from leanseg.core.io.images import read_image
from leanseg.core.model.checkpoint import load_checkpoint
from leanseg.core.predict import InferenceOptions, Segmenter

SAMPLES = Path(__file__).resolve().parents[1] / "assets" / "samples"
SETTINGS = {  # name: (mirror, scales)
    "one pass": ("off", (1.0,)),
    "mirror": ("flip", (1.0,)),
    "scales 0.75 1 1.25": ("off", (0.75, 1.0, 1.25)),
    "mirror + scales 0.75 1 1.25": ("flip", (0.75, 1.0, 1.25)),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=None, help="default: the shipped model")
    parser.add_argument("--engine", default="lean")
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--out", type=Path, default=Path("out/bench/averaging.json"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    loaded = load_checkpoint(args.model or default_model_path())
    images = [read_image(path) for path in sorted(SAMPLES.glob("*.png"))]
    segmenters = {name: Segmenter(loaded, InferenceOptions(device="cpu", engine=args.engine, precision=args.precision,
                                                           mirror=mirror, scales=scales))
                  for name, (mirror, scales) in SETTINGS.items()}
    for segmenter in segmenters.values():  # warm up: compile, first allocations
        segmenter.segment(images[0])
    seconds: dict[str, list[float]] = {name: [] for name in SETTINGS}
    for _ in range(args.rounds):
        for name, segmenter in segmenters.items():
            start = time.perf_counter()
            for image in images:
                segmenter.segment(image)
            seconds[name].append((time.perf_counter() - start) / len(images))
    base = statistics.median(seconds["one pass"])
    rows = {name: {"seconds_per_image": statistics.median(times), "times_one_pass": statistics.median(times) / base}
            for name, times in seconds.items()}
    size = f"{images[0].width}x{images[0].height}"
    print(f"| {size}, {args.engine} {args.precision}, {args.threads} thread(s), median of {args.rounds} rounds "
          "| s per image | x one pass |\n| --- | --- | --- |")
    for name, row in rows.items():
        print(f"| {name} | {row['seconds_per_image']:.3f} | {row['times_one_pass']:.2f} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"model": str(loaded.path), "image_size": size, "engine": args.engine,
                                    "precision": args.precision, "threads": args.threads, "rounds": args.rounds,
                                    "images": len(images), "settings": rows}, indent=2) + "\n", encoding="utf-8")
    print(f"written {args.out}")


if __name__ == "__main__":
    main()
