"""Benchmark `leanseg batch`: throughput against pure inference, and memory over a long batch.

    .venv/bin/python scripts/bench_batch.py [--model M] [--threads 2] [--quick]

1. Throughput: the same N CamVid images (default 100, 360x480) segmented (a) by `Segmenter.segment`
   alone, from images decoded beforehand (the engine's pure inference rate), and (b) by `run_batch`
   (read on the reader thread, labels + overlay PNGs written on the writer thread, manifest and
   summary.csv kept). Each in its own subprocess, alternating, median of --repeats rounds after
   warm-up. Bar: batch images/s >= 0.9x pure.
2. Memory: one `run_batch` over 300 images; peak per image (VmHWM since the image started, so the
   reader and writer threads count too) and RSS sampled every 20 ms. Bar: the peak over all 300
   stays within 10% of the peak over the first 20.

Inputs are symlinked into a temporary folder (never copied); outputs go to /tmp. Without --model,
a random-init MobileUNetConfig(num_classes=11, width=0.75) is used (speed does not depend on weights).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

DATA = Path("/work/shared/data/camvid")


def _segmenter(model: str, device: str, engine: str):  # type: ignore[no-untyped-def]
    from leanseg.core.model.checkpoint import load_checkpoint
    from leanseg.core.predict import InferenceOptions, Segmenter

    return Segmenter(load_checkpoint(model), InferenceOptions(device=device, engine=engine))


def case_pure(probe: Any, model: str, image_dir: str, device: str, engine: str, warmup: int) -> dict[str, Any]:
    """Images decoded beforehand, then `segment` on each: the pure inference rate."""
    from leanseg.core.io.images import read_image

    segmenter = _segmenter(model, device, engine)
    images = [read_image(p) for p in sorted(Path(image_dir).iterdir())]
    for image in images[:warmup]:
        segmenter.segment(image)
    start = time.perf_counter()
    for image in images:
        segmenter.segment(image)
    seconds = time.perf_counter() - start
    return {"images": len(images), "seconds": seconds, "images_per_s": len(images) / seconds, "peak_bytes": None}


def case_batch(probe: Any, model: str, image_dir: str, out_dir: str, device: str, engine: str,
               warmup: int) -> dict[str, Any]:
    """`run_batch` over the folder (labels + overlay) after the same warm-up as `case_pure`."""
    from leanseg.core.io.images import read_image
    from leanseg.core.jobs.batch import run_batch
    from leanseg.core.jobs.batch_plan import BatchSettings

    segmenter = _segmenter(model, device, engine)
    for path in sorted(Path(image_dir).iterdir())[:warmup]:
        segmenter.segment(read_image(path))
    summary = run_batch(BatchSettings(Path(image_dir), Path(out_dir), write_overlay=True), segmenter)
    assert summary.all_ok, [r.error for r in summary.failed]
    count = len(summary.records)
    return {"images": count, "seconds": summary.seconds, "images_per_s": count / summary.seconds,
            "peak_bytes": None}


def case_memory(probe: Any, model: str, image_dir: str, out_dir: str, device: str, engine: str,
                first: int) -> dict[str, Any]:
    """One long batch; per-image peaks in finishing order and RSS sampled by image count."""
    import psutil

    from leanseg.core.events import JobEvent
    from leanseg.core.jobs.batch import run_batch
    from leanseg.core.jobs.batch_plan import BatchSettings

    segmenter = _segmenter(model, device, engine)
    finished = [0]
    rss_by_image: list[tuple[int, int]] = []  # (images finished, RSS bytes)
    stop = threading.Event()

    def sample() -> None:
        process = psutil.Process()
        while not stop.wait(0.02):
            rss_by_image.append((finished[0], process.memory_info().rss))

    def count(event: JobEvent) -> None:
        if event.kind in ("image", "error"):
            finished[0] += 1

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    summary = run_batch(BatchSettings(Path(image_dir), Path(out_dir), write_overlay=True), segmenter,
                        on_event=count)
    stop.set()
    sampler.join()
    assert summary.all_ok, [r.error for r in summary.failed]
    peaks = [r.peak_bytes for r in summary.records]
    rss_first = max((rss for n, rss in rss_by_image if n <= first), default=0)
    rss_all = max((rss for _, rss in rss_by_image), default=0)
    return {"images": len(peaks), "first": first, "peak_first_bytes": max(peaks[:first]),
            "peak_all_bytes": max(peaks), "rss_first_bytes": rss_first, "rss_all_bytes": rss_all,
            "rss_last_bytes": rss_by_image[-1][1] if rss_by_image else 0,
            "peak_per_image_bytes": peaks, "seconds": summary.seconds, "peak_bytes": None}


def _link_images(source: Path, count: int, folder: Path) -> Path:
    folder.mkdir(parents=True)
    paths = sorted(source.glob("*.png"))[:count]
    if len(paths) < count:
        raise SystemExit(f"{source} has {len(paths)} PNG images, {count} needed")
    for path in paths:
        (folder / path.name).symlink_to(path)
    return folder


def _random_model(path: Path) -> Path:
    import torch

    from leanseg.core.model import MobileUNet, MobileUNetConfig
    from leanseg.core.model.checkpoint import default_info, save_checkpoint

    torch.manual_seed(0)
    config = MobileUNetConfig(num_classes=11, width=0.75)
    return save_checkpoint(path, MobileUNet(config).eval(), default_info(config))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=None, help="checkpoint; default: random-init CamVid config")
    parser.add_argument("--images", type=int, default=100, help="images for the throughput test (default 100)")
    parser.add_argument("--memory-images", type=int, default=300, help="images for the memory test (default 300)")
    parser.add_argument("--repeats", type=int, default=3, help="alternating rounds (default 3)")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads per configuration (default 2)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--engine", default=None, help="default: the engine InferenceOptions picks")
    parser.add_argument("--data", type=Path, default=DATA, help="CamVid folder with val/ and train/")
    parser.add_argument("--json", type=Path, default=Path("/tmp/leanseg_bench_batch.json"))
    parser.add_argument("--quick", action="store_true", help="10 and 40 images, 1 round: a smoke test")
    args = parser.parse_args()
    if args.quick:
        args.images, args.memory_images, args.repeats = 10, 40, 1

    from leanseg.core.benchmarks.measure import run_case
    from leanseg.core.benchmarks.report import format_table, write_json
    from leanseg.core.predict import InferenceOptions

    engine = args.engine or InferenceOptions.engine
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).parent),
                                                             os.environ.get("PYTHONPATH")]))
    work = Path(tempfile.mkdtemp(prefix="leanseg_bench_batch_"))
    try:
        model = str(args.model or _random_model(work / "camvid_random.safetensors"))
        throughput_dir = _link_images(args.data / "val", args.images, work / "throughput")
        memory_dir = _link_images(args.data / "train", args.memory_images, work / "memory")
        common = {"model": model, "device": args.device, "engine": engine}
        rounds: list[dict[str, Any]] = []
        for round_index in range(args.repeats):
            pure = run_case("bench_batch:case_pure", {**common, "image_dir": str(throughput_dir), "warmup": 3},
                            threads=args.threads)
            batch = run_case("bench_batch:case_batch", {**common, "image_dir": str(throughput_dir), "warmup": 3,
                             "out_dir": str(work / f"out_{round_index}")}, threads=args.threads)
            for name, result in (("pure", pure), ("batch", batch)):
                if "error" in result:
                    raise SystemExit(f"{name} round {round_index}: {result['error']}")
            rounds.append({"round": round_index + 1, "pure images/s": pure["images_per_s"],
                           "batch images/s": batch["images_per_s"],
                           "ratio": batch["images_per_s"] / pure["images_per_s"]})
            print(f"round {round_index + 1}: pure {pure['images_per_s']:.3f} img/s, "
                  f"batch {batch['images_per_s']:.3f} img/s", flush=True)
        pure_rate = statistics.median(r["pure images/s"] for r in rounds)
        batch_rate = statistics.median(r["batch images/s"] for r in rounds)
        ratio = statistics.median(r["ratio"] for r in rounds)
        memory = run_case("bench_batch:case_memory", {**common, "image_dir": str(memory_dir), "first": 20,
                          "out_dir": str(work / "out_memory")}, threads=args.threads, timeout=3600)
        if "error" in memory:
            raise SystemExit(f"memory run: {memory['error']}")
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"\nThroughput, {args.images} CamVid val images (360x480), {args.threads} threads, {args.device}, "
          f"engine {engine}; batch writes labels + overlay PNGs")
    print(format_table(rounds, ["round", "pure images/s", "batch images/s", "ratio"]))
    print(f"median: pure {pure_rate:.3f} img/s, batch {batch_rate:.3f} img/s, ratio {ratio:.3f} "
          f"(bar >= 0.9: {'PASS' if ratio >= 0.9 else 'FAIL'})")
    mb = 1e6
    growth_peak = memory["peak_all_bytes"] / memory["peak_first_bytes"] - 1
    growth_rss = memory["rss_all_bytes"] / memory["rss_first_bytes"] - 1
    print(f"\nMemory over {memory['images']} CamVid train images ({memory['seconds']:.0f} s)")
    print(format_table([
        {"measure": "per-image peak (VmHWM)", "first 20 MB": memory["peak_first_bytes"] / mb,
         "all MB": memory["peak_all_bytes"] / mb, "growth %": 100 * growth_peak},
        {"measure": "RSS sampled every 20 ms", "first 20 MB": memory["rss_first_bytes"] / mb,
         "all MB": memory["rss_all_bytes"] / mb, "growth %": 100 * growth_rss},
    ], ["measure", "first 20 MB", "all MB", "growth %"]))
    print(f"bar (growth <= 10%): {'PASS' if max(growth_peak, growth_rss) <= 0.10 else 'FAIL'}")
    payload = {"images": args.images, "threads": args.threads, "device": args.device, "engine": engine,
               "model": str(args.model) if args.model else "random-init MobileUNetConfig(11, width=0.75)",
               "rounds": rounds, "pure_images_per_s": pure_rate, "batch_images_per_s": batch_rate,
               "ratio": ratio, "memory": memory, "memory_growth_peak": growth_peak, "memory_growth_rss": growth_rss}
    print(f"JSON: {write_json(args.json, payload)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
