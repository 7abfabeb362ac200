"""Benchmark `leanseg batch --ray`: images/s with 2 actors x 1 thread against 1 actor x 1 thread.

    .venv/bin/python scripts/bench_ray.py [--model M] [--images 80] [--repeats 3] [--quick]

A real local cluster (a head node and a worker node of 1 CPU each, separate `ray start` process
trees on loopback addresses) runs the same N CamVid val images (360x480, labels + overlay PNGs)
with each configuration, alternating, each driver in its own subprocess, for --repeats rounds.
The rate is counted after warm-up: from the moment the first `warmup` images have come back
(every actor has compiled its model and is busy) to the last image, so actor start-up and model
compilation are left out; the wall time of the whole run is reported beside it. Bar: the median
ratio (2 actors / 1 actor) >= 1.6. Without --model, a random-init MobileUNetConfig(num_classes=11,
width=0.75) is used (speed does not depend on weights). The machine's load average is printed:
the bar is only meaningful on a quiet machine. Beside each run, the CPU that each role used in the
same window is sampled (bench_ray_cpu.py): the actors, the driver, Ray's own processes, and
everything else on the machine (`other`: another user's work shows there).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DATA = Path("/work/shared/data/camvid")


def case_ray(probe: Any, model: str, image_dir: str, out_dir: str, address: str, actors: int, threads: int,
             batch_size: int, warmup: int) -> dict[str, Any]:
    """One `run_batch_on_ray` over the folder; images/s after the first `warmup` images came back."""
    from leanseg.core.cluster import RayOptions, run_batch_on_ray
    from leanseg.core.events import JobEvent
    from leanseg.core.jobs.batch_plan import BatchSettings
    from leanseg.core.model.checkpoint import load_checkpoint
    from leanseg.core.predict import InferenceOptions

    finished_at: list[float] = []

    def on_event(event: JobEvent) -> None:
        if event.kind in ("image", "error"):
            finished_at.append(time.perf_counter())

    summary = run_batch_on_ray(BatchSettings(Path(image_dir), Path(out_dir), write_overlay=True),
                               load_checkpoint(model), InferenceOptions(device="cpu"),
                               RayOptions(address=address, actors=actors, threads_per_actor=threads,
                                          batch_size=batch_size), on_event=on_event)
    assert summary.all_ok, [r.error for r in summary.failed]
    counted = len(finished_at) - warmup
    seconds = finished_at[-1] - finished_at[warmup - 1]
    return {"images": len(finished_at), "counted": counted, "seconds": seconds,
            "images_per_s": counted / seconds, "wall_seconds": summary.seconds,
            "inference_seconds": sum(r.seconds for r in summary.records), "peak_bytes": None}


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} on {os.cpu_count()} CPU(s)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=None, help="checkpoint; default: random-init CamVid config")
    parser.add_argument("--images", type=int, default=80, help="CamVid val images per run (default 80)")
    parser.add_argument("--repeats", type=int, default=3, help="alternating rounds (default 3)")
    parser.add_argument("--batch-size", type=int, default=2, help="images per actor call (default 2)")
    parser.add_argument("--data", type=Path, default=DATA, help="CamVid folder with val/")
    parser.add_argument("--json", type=Path, default=Path("/tmp/leanseg_bench_ray.json"))
    parser.add_argument("--quick", action="store_true", help="16 images, 1 round: a smoke test")
    args = parser.parse_args()
    if args.quick:
        args.images, args.repeats = 16, 1

    from bench_ray_cpu import CpuSampler

    from leanseg.core.benchmarks.bench_inputs import link_images, random_camvid_model
    from leanseg.core.benchmarks.measure import run_case
    from leanseg.core.benchmarks.report import format_table, write_json
    from leanseg.core.cluster import LocalRayCluster, NodeSpec

    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).parent),
                                                             os.environ.get("PYTHONPATH")]))
    configurations = [(1, 1), (2, 1)]  # (actors, threads per actor)
    warmup = 2 * args.batch_size * max(a for a, _ in configurations)
    if args.images <= warmup:
        raise SystemExit(f"--images must exceed the {warmup} warm-up images")
    load_before = _load()
    print(f"before: {load_before}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="leanseg_bench_ray_"))
    rounds: list[dict[str, Any]] = []
    cpu_rows: list[dict[str, Any]] = []
    try:
        model = str(args.model or random_camvid_model(work / "camvid_random.safetensors"))
        image_dir = link_images(args.data / "val", args.images, work / "in")
        with LocalRayCluster([NodeSpec(num_cpus=1), NodeSpec(num_cpus=1)]) as cluster:
            print(f"cluster: head + 1 worker node, 1 CPU each, at {cluster.address}", flush=True)
            os.environ.update(cluster.driver_env)  # the drivers run_case starts inherit it
            for round_index in range(args.repeats):
                row: dict[str, Any] = {"round": round_index + 1}
                for actors, threads in configurations:
                    out_dir = work / f"out_{round_index}_{actors}x{threads}"
                    with CpuSampler(out_dir) as sampler:
                        result = run_case("bench_ray:case_ray", {
                            "model": model, "image_dir": str(image_dir), "out_dir": str(out_dir),
                            "address": cluster.address, "actors": actors, "threads": threads,
                            "batch_size": args.batch_size, "warmup": warmup}, threads=1, timeout=1800,
                            user_malloc=True)
                    cpu_rows.append({"round": round_index + 1, "actors": actors, **sampler.breakdown(warmup)})
                    if "error" in result:
                        raise SystemExit(f"{actors} actor(s) round {round_index + 1}: {result['error']}")
                    shutil.rmtree(out_dir, ignore_errors=True)
                    row[f"{actors}x{threads} images/s"] = result["images_per_s"]
                    row[f"{actors}x{threads} wall s"] = result["wall_seconds"]
                row["ratio"] = row["2x1 images/s"] / row["1x1 images/s"]
                rounds.append(row)
                print(f"round {round_index + 1}: 1 actor {row['1x1 images/s']:.3f} img/s, "
                      f"2 actors {row['2x1 images/s']:.3f} img/s, ratio {row['ratio']:.2f}; {_load()}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load_after = _load()
    one = statistics.median(r["1x1 images/s"] for r in rounds)
    two = statistics.median(r["2x1 images/s"] for r in rounds)
    ratio = statistics.median(r["ratio"] for r in rounds)
    print(f"\nRay batch, {args.images} CamVid val images (360x480), labels + overlay, batches of {args.batch_size}; "
          f"rate after {warmup} warm-up images")
    print(format_table(rounds, ["round", "1x1 images/s", "2x1 images/s", "ratio", "1x1 wall s", "2x1 wall s"]))
    print(f"median: 1 actor x 1 thread {one:.3f} img/s, 2 actors x 1 thread {two:.3f} img/s, ratio {ratio:.2f} "
          f"(bar >= 1.6: {'PASS' if ratio >= 1.6 else 'FAIL'})")
    print(f"before: {load_before}; after: {load_after}")
    print("\nCPU by role in the same window (cores: CPUs busy on average, of 2; ms/img: CPU time per image)")
    print(format_table(cpu_rows, ["round", "actors", "images", "actors cores", "actors ms/img", "driver ms/img",
                                  "ray ms/img", "other cores"]))
    payload = {"images": args.images, "batch_size": args.batch_size, "warmup_images": warmup,
               "model": str(args.model) if args.model else "random-init MobileUNetConfig(11, width=0.75)",
               "rounds": rounds, "cpu": cpu_rows, "one_actor_images_per_s": one, "two_actors_images_per_s": two,
               "ratio": ratio,
               "load_before": load_before, "load_after": load_after}
    print(f"JSON: {write_json(args.json, payload)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
