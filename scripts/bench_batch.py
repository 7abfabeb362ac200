"""Benchmark `leanseg batch`: throughput against pure inference, and memory over a long batch.

    .venv/bin/python scripts/bench_batch.py [--model M] [--threads 2] [--quick]

1. Throughput: the same N CamVid images (default 100, 360x480) segmented (a) by `Segmenter.segment`
   alone, from images decoded beforehand (the engine's pure inference rate), and (b) by `run_batch`
   (read on the reader thread, labels + overlay PNGs written on the writer thread, manifest and
   summary.csv kept). Each in its own subprocess with glibc's default malloc (as a user's process
   runs), alternating (order swapped every round), median of
   --repeats rounds after warm-up. Bar: batch images/s >= 0.9x pure. CPU seconds per image (all
   threads) are reported too: on a shared machine wall time follows the neighbours' load, while the
   CPU-time ratio shows the batch's extra work directly.
2. Memory: one `run_batch` over 300 images (MALLOC_MMAP_THRESHOLD_=65536, so RSS follows live
   bytes); peak per image (VmHWM since the image started, so the reader and writer threads count
   too) and RSS sampled every 20 ms. Bar: the peak over all 300
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

from leanseg.core.benchmarks.bench_inputs import link_images, random_camvid_model

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
    start, cpu_start = time.perf_counter(), _cpu_seconds()
    for image in images:
        segmenter.segment(image)
    seconds, cpu = time.perf_counter() - start, _cpu_seconds() - cpu_start
    return {"images": len(images), "seconds": seconds, "images_per_s": len(images) / seconds,
            "cpu_seconds": cpu, "images_per_cpu_s": len(images) / cpu, "peak_bytes": None}


def case_batch(probe: Any, model: str, image_dir: str, out_dir: str, device: str, engine: str,
               warmup: int, overlay: bool = True) -> dict[str, Any]:
    """`run_batch` over the folder (labels, + overlay) after the same warm-up as `case_pure`."""
    from leanseg.core.io.images import read_image
    from leanseg.core.jobs.batch import run_batch
    from leanseg.core.jobs.batch_plan import BatchSettings

    segmenter = _segmenter(model, device, engine)
    for path in sorted(Path(image_dir).iterdir())[:warmup]:
        segmenter.segment(read_image(path))
    cpu_start = _cpu_seconds()
    summary = run_batch(BatchSettings(Path(image_dir), Path(out_dir), write_overlay=overlay), segmenter)
    cpu = _cpu_seconds() - cpu_start  # all threads: inference, reader and writer
    assert summary.all_ok, [r.error for r in summary.failed]
    count = len(summary.records)
    return {"images": count, "seconds": summary.seconds, "images_per_s": count / summary.seconds,
            "cpu_seconds": cpu, "images_per_cpu_s": count / cpu, "peak_bytes": None}


def _cpu_seconds() -> float:
    """CPU time of this process, all threads (user + system)."""
    times = os.times()
    return times.user + times.system


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=None, help="checkpoint; default: random-init CamVid config")
    parser.add_argument("--images", type=int, default=100,
                        help="images for the throughput test (default 100; 0 skips it)")
    parser.add_argument("--memory-images", type=int, default=300,
                        help="images for the memory test (default 300; 0 skips it)")
    parser.add_argument("--repeats", type=int, default=3, help="alternating rounds (default 3)")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads per configuration (default 2)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--engine", default=None, help="default: the engine InferenceOptions picks")
    parser.add_argument("--data", type=Path, default=DATA, help="CamVid folder with val/ and train/")
    parser.add_argument("--json", type=Path, default=Path("/tmp/leanseg_bench_batch.json"))
    parser.add_argument("--labels-only", action="store_true",
                        help="throughput of the default outputs (labels only) instead of labels + overlay")
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
    payload: dict[str, Any] = {"threads": args.threads, "device": args.device, "engine": engine,
                               "outputs": "labels" if args.labels_only else "labels+overlay",
                               "model": str(args.model or "random-init MobileUNetConfig(11, width=0.75)")}
    work = Path(tempfile.mkdtemp(prefix="leanseg_bench_batch_"))
    try:
        model = str(args.model or random_camvid_model(work / "camvid_random.safetensors"))
        common = {"model": model, "device": args.device, "engine": engine}
        if args.images > 0 and args.repeats > 0:
            payload["throughput"] = _throughput(args, common, work, run_case)
        if args.memory_images > 0:
            payload["memory"] = _memory(args, common, work, run_case)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if "throughput" in payload:
        _print_throughput(args, engine, payload["throughput"], format_table)
    if "memory" in payload:
        _print_memory(payload["memory"], format_table)
    print(f"JSON: {write_json(args.json, payload)}")
    return 0


def _throughput(args: argparse.Namespace, common: dict[str, Any], work: Path, run_case: Any) -> dict[str, Any]:
    """Alternating pure / batch subprocesses; medians over the rounds."""
    image_dir = link_images(args.data / "val", args.images, work / "throughput")
    rounds: list[dict[str, Any]] = []
    for round_index in range(args.repeats):
        cases = {"pure": ("bench_batch:case_pure", {**common, "image_dir": str(image_dir), "warmup": 3}),
                 "batch": ("bench_batch:case_batch", {**common, "image_dir": str(image_dir), "warmup": 3,
                                                      "out_dir": str(work / f"out_{round_index}"),
                                                      "overlay": not args.labels_only})}
        order = ["pure", "batch"] if round_index % 2 == 0 else ["batch", "pure"]  # no bias from load drift
        results = {name: run_case(*cases[name], threads=args.threads, timeout=7200, user_malloc=True)
                   for name in order}  # glibc's default malloc, as a user's process runs
        pure, batch = results["pure"], results["batch"]
        for name, result in (("pure", pure), ("batch", batch)):
            if "error" in result:
                raise SystemExit(f"{name} round {round_index}: {result['error']}")
        rounds.append({"round": round_index + 1, "pure images/s": pure["images_per_s"],
                       "batch images/s": batch["images_per_s"],
                       "ratio": batch["images_per_s"] / pure["images_per_s"],
                       "pure images/CPU-s": pure["images_per_cpu_s"], "batch images/CPU-s": batch["images_per_cpu_s"],
                       "CPU ratio": batch["images_per_cpu_s"] / pure["images_per_cpu_s"]})
        print(f"round {round_index + 1}: pure {pure['images_per_s']:.3f} img/s, "
              f"batch {batch['images_per_s']:.3f} img/s", flush=True)
    return {"images": args.images, "rounds": rounds,
            "pure_images_per_s": statistics.median(r["pure images/s"] for r in rounds),
            "batch_images_per_s": statistics.median(r["batch images/s"] for r in rounds),
            "ratio": statistics.median(r["ratio"] for r in rounds),
            "cpu_ratio": statistics.median(r["CPU ratio"] for r in rounds)}


def _memory(args: argparse.Namespace, common: dict[str, Any], work: Path, run_case: Any) -> dict[str, Any]:
    image_dir = link_images(args.data / "train", args.memory_images, work / "memory")
    memory = run_case("bench_batch:case_memory", {**common, "image_dir": str(image_dir), "first": 20,
                      "out_dir": str(work / "out_memory")}, threads=args.threads, timeout=7200)
    if "error" in memory:
        raise SystemExit(f"memory run: {memory['error']}")
    memory["growth_peak"] = memory["peak_all_bytes"] / memory["peak_first_bytes"] - 1
    memory["growth_rss"] = memory["rss_all_bytes"] / memory["rss_first_bytes"] - 1
    return dict(memory)


def _print_throughput(args: argparse.Namespace, engine: str, result: dict[str, Any], format_table: Any) -> None:
    outputs = "labels PNGs (the default)" if args.labels_only else "labels + overlay PNGs"
    print(f"\nThroughput, {result['images']} CamVid val images (360x480), {args.threads} threads, {args.device}, "
          f"engine {engine}; batch writes {outputs}")
    print(format_table(result["rounds"], ["round", "pure images/s", "batch images/s", "ratio", "pure images/CPU-s",
                                          "batch images/CPU-s", "CPU ratio"]))
    ratio = result["ratio"]
    print(f"median: pure {result['pure_images_per_s']:.3f} img/s, batch {result['batch_images_per_s']:.3f} img/s, "
          f"ratio {ratio:.3f} (bar >= 0.9: {'PASS' if ratio >= 0.9 else 'FAIL'}); CPU-time ratio "
          f"{result['cpu_ratio']:.3f} (the batch's extra work; wall ratios need an otherwise idle machine)")


def _print_memory(memory: dict[str, Any], format_table: Any) -> None:
    mb = 1e6
    print(f"\nMemory over {memory['images']} CamVid train images ({memory['seconds']:.0f} s)")
    print(format_table([
        {"measure": "per-image peak (VmHWM)", "first 20 MB": memory["peak_first_bytes"] / mb,
         "all MB": memory["peak_all_bytes"] / mb, "growth %": 100 * memory["growth_peak"]},
        {"measure": "RSS sampled every 20 ms", "first 20 MB": memory["rss_first_bytes"] / mb,
         "all MB": memory["rss_all_bytes"] / mb, "growth %": 100 * memory["growth_rss"]},
    ], ["measure", "first 20 MB", "all MB", "growth %"]))
    growth = max(memory["growth_peak"], memory["growth_rss"])
    print(f"bar (growth <= 10%): {'PASS' if growth <= 0.10 else 'FAIL'}")


if __name__ == "__main__":
    sys.exit(main())
