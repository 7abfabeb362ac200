"""Latency of the engine (fp32, and bf16 where oneDNN has bf16 convolutions) against ONNX Runtime on the
zoo, alternating in one process.

    .venv/bin/python scripts/bench_zoo_latency.py SIZE ROUNDS NAME...   (NAME.pt2 and NAME.onnx in out/zoo)

Each round runs the engine fp32, the engine bf16, then ONNX Runtime, on the same input, each after a
half-second pause; a ratio is the median of the per-round ratios, so a busy machine's changing load stays
out of it.
`leanseg bench --zoo` measures each configuration in its own process, one after another (`--rounds N`
repeats that and takes the median of the rounds' ratios): that is the figure the bars use. Here the engine
shares its process with an ONNX Runtime session, which read it slower (LR-ASPP 1.52x against 1.33x).
Writes out/bench/zoo_latency_SIZE.json.
"""
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch

from leanseg.core.benchmarks.inference_cases import sample_input
from leanseg.core.engine import compile
from leanseg.core.model.sources import load_model

# Without a pause, ONNX Runtime's intra-op threads, still spinning after its run, took CPU from the engine's
# next run: LR-ASPP read 1.82x ORT back to back and 1.43x with this pause (FPN: 1.38 and 1.40).
SETTLE_S = 0.5


def timed(run) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def main(size: int, rounds: int, names: list[str]) -> None:
    torch.set_num_threads(2)
    results = {}
    dtypes = {"fp32": torch.float32}
    if torch.ops.mkldnn._is_mkldnn_bf16_supported():
        dtypes["bf16"] = torch.bfloat16
    for name in names:
        model = load_model(f"out/zoo/{name}.pt2").model
        plans = {key: compile(model, device="cpu", dtype=dtype) for key, dtype in dtypes.items()}
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = 2, 1
        session = ort.InferenceSession(f"out/zoo/{name}.onnx", options, providers=["CPUExecutionProvider"])
        x = sample_input(size)  # a CamVid sample, as `leanseg bench --zoo` times (noise has class edges everywhere)
        feed = {session.get_inputs()[0].name: x.numpy()}
        for _ in range(2):  # warm-up: oneDNN primitives, ORT's arena
            for plan in plans.values():
                plan.run(x)
            session.run(None, feed)
        times: dict[str, list[float]] = {key: [] for key in [*plans, "ort"]}
        for _ in range(rounds):
            for key, plan in plans.items():
                time.sleep(SETTLE_S)  # ORT's pool threads spin on after a run: let them park first
                times[key].append(timed(lambda: plan.run(x)))  # noqa: B023 (called at once, inside the iteration)
            time.sleep(SETTLE_S)
            times["ort"].append(timed(lambda: session.run(None, feed)))  # noqa: B023
        results[name] = {"ort_s": statistics.median(times["ort"])}
        for key in plans:
            results[name][f"{key}_s"] = statistics.median(times[key])
            results[name][f"{key}_ratio"] = statistics.median(a / b for a, b in zip(times[key], times["ort"]))
        print(f"{name:30s} ORT {results[name]['ort_s']:.3f} s  " + "  ".join(
            f"{key} {results[name][f'{key}_s']:.3f} s ({results[name][f'{key}_ratio']:.2f}x)" for key in plans),
            flush=True)
    geomeans = {key: float(np.exp(np.mean(np.log([r[f"{key}_ratio"] for r in results.values()])))) for key in dtypes}
    print("geometric mean of the ratios: " + ", ".join(f"{key} {value:.2f}" for key, value in geomeans.items()))
    out = Path(f"out/bench/zoo_latency_{size}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"size": size, "rounds": rounds, "models": results, "geomean_ratio": geomeans},
                              indent=1))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:])
