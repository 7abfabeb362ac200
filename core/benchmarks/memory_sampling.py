"""What memory telemetry costs: CPU time of the 10 Hz sampling thread, and each read on its own.

    python -m leanseg.core.benchmarks.memory_sampling [--seconds 5] [--repeats 3] [--out out/bench]

Each scenario runs in its own subprocess: an idle process, a process running inference (heap busy),
and one whose heap holds 20,000 free chunks (mallinfo2 walks the free lists, so this is its worst
case). The figure is the sampling thread's own CPU time (`time.thread_time`) over wall time, in % of
one core; median of `--repeats`. Then, as a cross-check, inference speed with and without sampling in
alternating blocks of one process. Prints a table and writes memory_sampling.json.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

SCENARIOS = ("idle", "inference", "fragmented heap")


def _slowdown_child(blocks: int, block_s: float, rate_hz: float) -> dict[str, float]:
    """Median forward time with the monitor sampling vs. without, in alternating blocks of one process."""
    import torch

    from leanseg.core.memory import MemoryMonitor
    from leanseg.core.model import MobileUNet, MobileUNetConfig

    torch.set_num_threads(1)
    model = MobileUNet(MobileUNetConfig(num_classes=11, width=0.75)).eval()
    image = torch.rand(1, 3, 256, 256)
    monitor = MemoryMonitor("cpu", rate_hz=rate_hz)
    times: dict[bool, list[float]] = {True: [], False: []}
    with torch.inference_mode():
        model(image)  # warm-up
        for block in range(blocks):
            sampling = block % 2 == 0
            if sampling:
                monitor.start()
            end = time.monotonic() + block_s
            while time.monotonic() < end:
                start = time.perf_counter()
                model(image)
                times[sampling].append(time.perf_counter() - start)
            monitor.stop()
    monitor.close()
    with_monitor, without = statistics.median(times[True]), statistics.median(times[False])
    return {"forward_ms_sampling": 1e3 * with_monitor, "forward_ms_not_sampling": 1e3 * without,
            "ratio": with_monitor / without}


def _child(scenario: str, seconds: float, rate_hz: float) -> dict[str, float]:
    import torch

    from leanseg.core.memory import MemoryMonitor
    from leanseg.core.model import MobileUNet, MobileUNetConfig

    torch.set_num_threads(1)
    keep: list[torch.Tensor] = []
    if scenario == "fragmented heap":
        holes = [torch.empty(64) for _ in range(40_000)]
        keep = holes[1::2]
        del holes  # every other chunk freed: 20,000 free chunks that cannot merge
    monitor = MemoryMonitor("cpu", rate_hz=rate_hz)
    start = time.monotonic()
    monitor.start()
    if scenario == "inference":
        model = MobileUNet(MobileUNetConfig(num_classes=11, width=0.75)).eval()
        image = torch.rand(1, 3, 256, 256)
        with torch.inference_mode():
            while time.monotonic() - start < seconds:
                model(image)
    else:
        time.sleep(seconds)
    monitor.stop()
    wall = time.monotonic() - start
    samples = len(monitor.snapshot()["time"])
    # the cost of one read, measured alone in this thread
    cpu0 = time.thread_time()
    reads = 200
    for _ in range(reads):
        monitor.sample_now()
    per_read_us = (time.thread_time() - cpu0) / reads * 1e6
    monitor.close()
    del keep
    return {"cpu_percent_of_one_core": 100 * monitor.sampling_cpu_seconds / wall, "samples": samples,
            "wall_s": wall, "per_read_us": per_read_us, "source": monitor.source}  # type: ignore[dict-item]


def _run_isolated(call: str) -> dict[str, float]:
    code = (f"import json; from leanseg.core.benchmarks.memory_sampling import _child, _slowdown_child; "
            f"print(json.dumps({call}))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}  # a user's default glibc
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{call} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0, help="sampling time per run (default 5)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per scenario, median reported (default 3)")
    parser.add_argument("--rate", type=float, default=10.0, help="samples per second (default 10)")
    parser.add_argument("--out", type=Path, default=Path("out/bench"), help="folder for memory_sampling.json")
    args = parser.parse_args(argv)
    rows = []
    print(f"memory sampling at {args.rate:g} Hz, {args.seconds:g} s per run, median of {args.repeats}")
    print(f"{'scenario':<18} {'source':<16} {'samples':>8} {'CPU % of 1 core':>16} {'per read (us)':>14}")
    for scenario in SCENARIOS:
        runs = [_run_isolated(f"_child({scenario!r}, {args.seconds}, {args.rate})") for _ in range(args.repeats)]
        row = {"scenario": scenario, "source": runs[0]["source"],
               "samples": statistics.median(r["samples"] for r in runs),
               "cpu_percent_of_one_core": statistics.median(r["cpu_percent_of_one_core"] for r in runs),
               "per_read_us": statistics.median(r["per_read_us"] for r in runs), "runs": runs}
        rows.append(row)
        print(f"{scenario:<18} {row['source']:<16} {row['samples']:>8.0f} {row['cpu_percent_of_one_core']:>16.3f} "
              f"{row['per_read_us']:>14.1f}")
    slowdown = _run_isolated(f"_slowdown_child(8, {args.seconds / 4}, {args.rate})")
    print(f"inference forward (MobileUNet 0.75, 256x256, 1 thread), alternating blocks in one process: "
          f"{slowdown['forward_ms_sampling']:.2f} ms sampling vs {slowdown['forward_ms_not_sampling']:.2f} ms not, "
          f"ratio {slowdown['ratio']:.3f} (noise on a shared machine is larger than 1 %)")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "memory_sampling.json"
    path.write_text(json.dumps({"rate_hz": args.rate, "seconds": args.seconds, "rows": rows, "slowdown": slowdown},
                               indent=2))
    print(f"written {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
