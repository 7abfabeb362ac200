"""Latency of the engine (fp32) against ONNX Runtime on the zoo, alternating in one process.

    .venv/bin/python scripts/bench_zoo_latency.py SIZE ROUNDS NAME...   (NAME.pt2 and NAME.onnx in out/zoo)

Each round runs the engine, then ONNX Runtime, on the same input, each after a half-second pause; the
ratio is the median of the per-round ratios, so a busy machine's changing load stays out of it.
`leanseg bench --zoo` measures each configuration in its own process (peaks), one after another.
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
    for name in names:
        plan = compile(load_model(f"out/zoo/{name}.pt2").model, device="cpu")
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = 2, 1
        session = ort.InferenceSession(f"out/zoo/{name}.onnx", options, providers=["CPUExecutionProvider"])
        x = torch.rand(1, 3, size, size)
        feed = {session.get_inputs()[0].name: x.numpy()}
        for _ in range(2):  # warm-up: oneDNN primitives, ORT's arena
            plan.run(x)
            session.run(None, feed)
        engine, onnx = [], []
        for _ in range(rounds):
            time.sleep(SETTLE_S)  # ORT's pool threads spin on after a run: let them park first
            engine.append(timed(lambda: plan.run(x)))  # noqa: B023 (called at once, inside the iteration)
            time.sleep(SETTLE_S)
            onnx.append(timed(lambda: session.run(None, feed)))  # noqa: B023
        ratio = statistics.median(a / b for a, b in zip(engine, onnx))
        results[name] = {"engine_s": statistics.median(engine), "ort_s": statistics.median(onnx), "ratio": ratio}
        print(f"{name:30s} engine {results[name]['engine_s']:.3f} s  ORT {results[name]['ort_s']:.3f} s  "
              f"ratio {ratio:.2f}", flush=True)
    geomean = float(np.exp(np.mean(np.log([r["ratio"] for r in results.values()]))))
    print(f"geometric mean of the ratios {geomean:.2f}")
    out = Path(f"out/bench/zoo_latency_{size}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"size": size, "rounds": rounds, "models": results, "geomean_ratio": geomean}, indent=1))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:])
