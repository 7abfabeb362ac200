"""Time per megapixel of tiled inference against whole-image inference at 1024 x 1024.

    .venv/bin/python scripts/bench_tiling_speed.py [--model M] [--rounds 3]

Cases (each in its own subprocess with glibc's default malloc, as a user's process runs; one
untimed run at the same size first, then the median of --repeats runs):

- engine whole at 1024 (the reference),
- engine tiled fast and exact at 2048 under the agreement budget (160MB: 2x2 tiles, as in the
  label agreement of `leanseg bench --sizes ... --agreement 2048`),
- engine tiled fast and exact at 4096 under 512MB (the whole image needs 0.94GB: tiles).

The cases alternate for --rounds rounds (order reversed every other round) and the ratio to the
reference of the same round is reported; the median over rounds is the figure. The bar (issue 4):
fast mode <= 1.3x whole@1024 per megapixel. The load average is printed: on a busy machine the
ratios wander.
"""
from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path
from typing import Any

from leanseg.core.benchmarks.measure import Probe, median_seconds, run_case
from leanseg.core.benchmarks.report import format_table, write_json
from leanseg.core.memory import parse_bytes

CASES = (  # (name, size, tiling, budget)
    ("whole@1024", 1024, "off", None),
    ("fast@2048 160MB", 2048, "fast", "160MB"),
    ("exact@2048 160MB", 2048, "exact", "160MB"),
    ("fast@4096 512MB", 4096, "fast", "512MB"),
    ("exact@4096 512MB", 4096, "exact", "512MB"),
)


def speed_case(probe: Probe, size: int, tiling: str, budget: int | None, model: str | None, repeats: int
               ) -> dict[str, Any]:
    """Median seconds of Segmenter.segment at size x size, after one untimed run at that size."""
    from leanseg.core.benchmarks.tiling import SAMPLE, load_bench_model, scaled_image
    from leanseg.core.io.images import ImageData
    from leanseg.core.predict import InferenceOptions, Segmenter

    segmenter = Segmenter(load_bench_model(model), InferenceOptions(device="cpu", tiling=tiling, memory_budget=budget))
    image = ImageData(scaled_image(str(SAMPLE), size))
    first = segmenter.segment(image)  # the untimed run: oneDNN primitives for this size, the tile plan
    seconds = median_seconds(lambda: segmenter.segment(image), repeats=repeats, warmup=0)
    return {"seconds": seconds, "plan": first.notes[0] if first.notes else "", "peak_bytes": None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=None, help="checkpoint (default: the shipped model)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=2, help="timed runs per case and round (default 2)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path, default=Path("out/bench/tiling_speed.json"))
    args = parser.parse_args()
    model = str(args.model) if args.model else None
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).parent),
                                                           os.environ.get("PYTHONPATH")]))  # for the children
    ratios: dict[str, list[float]] = {name: [] for name, *_ in CASES}
    per_mp: dict[str, list[float]] = {name: [] for name, *_ in CASES}
    plans: dict[str, str] = {}
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs", flush=True)
    for round_index in range(args.rounds):
        order = CASES if round_index % 2 == 0 else tuple(reversed(CASES))
        seconds_per_mp: dict[str, float] = {}
        for name, size, tiling, budget in order:
            result = run_case("bench_tiling_speed:speed_case",
                              {"size": size, "tiling": tiling, "budget": parse_bytes(budget) if budget else None,
                               "model": model, "repeats": args.repeats}, threads=args.threads, user_malloc=True,
                              timeout=1800)
            if "error" in result:
                print(f"{name}: {result['error']}")
                return 1
            seconds_per_mp[name] = result["seconds"] / (size * size / 1e6)
            plans[name] = result["plan"]
            print(f"round {round_index + 1} {name}: {seconds_per_mp[name]:.3f} s/MP", flush=True)
        for name in seconds_per_mp:
            per_mp[name].append(seconds_per_mp[name])
            ratios[name].append(seconds_per_mp[name] / seconds_per_mp["whole@1024"])
    rows = [{"case": name, "s/MP (median)": round(statistics.median(per_mp[name]), 3),
             "x whole@1024 (median)": round(statistics.median(ratios[name]), 3),
             "rounds": ", ".join(f"{r:.2f}" for r in ratios[name]), "plan": plans[name]} for name, *_ in CASES]
    print(f"\nload average after: {os.getloadavg()[0]:.2f}\n")
    print(format_table(rows, ["case", "s/MP (median)", "x whole@1024 (median)", "rounds", "plan"]))
    write_json(args.json, {"threads": args.threads, "rows": rows})
    print(f"\nwritten {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
