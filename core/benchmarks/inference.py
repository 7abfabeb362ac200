"""`leanseg bench` (default mode): peak memory and latency of eager PyTorch, the engine and ONNX Runtime.

For MobileUNet and PlainUNet at each size, every configuration runs in its own subprocess
(MALLOC_MMAP_THRESHOLD_=65536, peak from VmHWM above the baseline, or CUDA max allocated), median
of --repeats timed runs after a warm-up. Ratios are to `eager no_grad` and to ONNX Runtime of the
same model and size, from this one run. A second table answers the original question: train step
vs eval vs engine memory at one size. Writes bench_inference.json and two PNGs.
"""
from __future__ import annotations

import argparse
import importlib.util
import tempfile
from pathlib import Path
from typing import Any

from ..memory import format_bytes
from ..plotting import bar_chart, line_chart
from .inference_cases import MODELS
from .measure import run_case
from .report import format_table, verdict, write_json

CASE = "leanseg.core.benchmarks.inference_cases:inference_case"
CONFIGS = ("eager no_grad", "eager inference_mode", "engine whole", "engine fp32", "engine bf16", "onnxruntime")
QUESTION_CONFIGS = ("train step", "eval grad", "eager no_grad", "engine fp32")
COLUMNS = ("model", "size", "config", "peak", "x eager mem", "x ORT mem", "seconds", "x eager time", "x ORT time",
           "max|dlogit|", "labels same", "estimate/peak", "accounted", "peak step")
# The bars of issue 11: (model, size, config) -> (max peak ratio, max time ratio) to eager no_grad.
BARS = {("MobileUNet", 1024, "engine fp32"): (0.15, 0.6), ("PlainUNet", 1024, "engine fp32"): (0.5, 0.8)}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("inference (default mode)")
    group.add_argument("--inference-sizes", default=None, metavar="N,N,...",
                       help="square input sizes (default 512,1024,2048; --quick: 512)")
    group.add_argument("--inference-models", default=",".join(MODELS), help=f"default {','.join(MODELS)}")
    group.add_argument("--inference-configs", default=None, help=f"subset of: {', '.join(CONFIGS)}")
    group.add_argument("--inference-repeats", type=int, default=None,
                       help="timed runs per case (default 3; --quick: 2)")
    group.add_argument("--malloc", choices=("mapped", "user"), default="mapped",
                       help="mapped (default): children map every allocation over 64 KB, so the peak follows live "
                            "bytes; user: glibc's defaults, the latency a user's process sees (its peak then "
                            "includes what malloc keeps)")
    group.add_argument("--question-size", type=int, default=None,
                       help="size of the train-vs-eval-vs-engine table (default 1024; --quick: 256; 0: skip)")


def _parse_list(text: str, valid: tuple[str, ...], what: str) -> list[str]:
    items = [item.strip() for item in text.split(",") if item.strip()]
    unknown = [item for item in items if item not in valid]
    if unknown:
        files = [item for item in unknown if Path(item).suffix in (".pt2", ".onnx", ".leanseg", ".safetensors")]
        zoo = f"`leanseg bench --zoo {files[0]}` (with its .onnx beside it for ONNX Runtime) or " if files and \
            files[0].endswith(".pt2") else ""
        own = (f"; to benchmark a model file of your own, {zoo}`leanseg profile --model {files[0]}`"
               if files else "")
        raise ValueError(f"unknown {what} {unknown}; valid: {', '.join(valid)}{own}")
    return items


def run(args: argparse.Namespace) -> int:
    try:
        sizes = [int(s) for s in (args.inference_sizes or ("512" if args.quick else "512,1024,2048")).split(",")]
        models = _parse_list(args.inference_models, MODELS, "models")
        configs = _parse_list(args.inference_configs, CONFIGS, "configs") if args.inference_configs else list(CONFIGS)
    except ValueError as err:
        print(f"leanseg: error: {err}")
        return 2
    if "onnxruntime" in configs and args.device != "cpu":
        print("onnxruntime row skipped: measured on the CPU only")
        configs.remove("onnxruntime")
    if "onnxruntime" in configs and (importlib.util.find_spec("onnxruntime") is None
                                     or importlib.util.find_spec("onnx") is None):
        print("onnxruntime row skipped: install the bench extra (pip install 'leanseg[bench]')")
        configs.remove("onnxruntime")
    if "eager no_grad" not in configs:
        configs.insert(0, "eager no_grad")  # the reference every ratio and comparison needs
    repeats = args.inference_repeats or (2 if args.quick else 3)
    question_size = args.question_size if args.question_size is not None else (256 if args.quick else 1024)
    workdir = Path(tempfile.mkdtemp(prefix="leanseg-bench-"))
    rows = []
    for kind in models:
        for size in sizes:
            reference = str(workdir / f"{kind}_{size}.pt")
            for config in configs:
                rows.append(_measure(args, kind, size, config, repeats, reference))
    _add_ratios(rows)
    if args.malloc == "user":  # malloc reuses what the warm-up freed: RSS peaks say nothing about the engine
        print("--malloc user: times as a user's process sees them; peaks are not comparable and are left out")
        for row in rows:
            for key in ("peak_bytes", "estimate_bytes"):
                row.pop(key, None)
            row.update({key: "-" for key in ("peak", "x eager mem", "x ORT mem", "estimate/peak") if key in row})
    print(format_table(rows, COLUMNS))
    question = _question_table(args, models, question_size, repeats, workdir) if question_size else []
    if question:
        print(f"\nThe original question at {question_size}x{question_size}: peak memory above baseline")
        print(format_table(question, ("model", "config", "peak", "x eager mem", "seconds")))
    verdicts = _bars(rows)
    print("\n" + "\n".join(verdicts))
    args.out.mkdir(parents=True, exist_ok=True)
    payload = {"threads": args.threads, "device": args.device, "repeats": repeats, "malloc": args.malloc, "rows": rows,
               "question": question, "bars": verdicts}
    path = write_json(args.out / "bench_inference.json", payload)
    charts = _charts(rows, args.out)
    print(f"\nwrote {path}, " + ", ".join(str(c) for c in charts))
    return 0


def _measure(args: argparse.Namespace, kind: str, size: int, config: str, repeats: int,
             reference: str) -> dict[str, Any]:
    print(f"  {kind} {size}x{size} {config} ...", flush=True)
    kwargs = {"kind": kind, "size": size, "config": config, "repeats": repeats, "reference": reference,
              "device": args.device, "threads": args.threads}
    result = run_case(CASE, kwargs, threads=args.threads, user_malloc=args.malloc == "user")
    row: dict[str, Any] = {"model": kind, "size": size, "config": config, **result}
    if "error" in result:
        row["peak"] = f"error: {str(result['error']).split(' | ')[-1][:100]}"
        return row
    row["peak"] = format_bytes(result["peak_bytes"])
    if "max_abs_diff" in result:
        row["max|dlogit|"] = f"{result['max_abs_diff']:.1e}"
        row["labels same"] = f"{100 * result['label_agreement']:.3f}%"
    if "estimate_bytes" in result:
        row["estimate/peak"] = round(result["estimate_bytes"] / max(1, result["peak_bytes"]), 3)
        row["accounted"] = format_bytes(result["accounted_bytes"])
        row["peak step"] = result.get("accounted_peak_step")
    return row


def _add_ratios(rows: list[dict[str, Any]]) -> None:
    def find(kind: str, size: int, config: str) -> dict[str, Any] | None:
        return next((r for r in rows if (r["model"], r["size"], r["config"]) == (kind, size, config)
                     and "seconds" in r), None)

    for row in rows:
        if "seconds" not in row:
            continue
        for name, config in (("eager", "eager no_grad"), ("ORT", "onnxruntime")):
            base = find(row["model"], row["size"], config)
            if base is not None:
                row[f"x {name} mem"] = round(row["peak_bytes"] / max(1, base["peak_bytes"]), 3)
                row[f"x {name} time"] = round(row["seconds"] / base["seconds"], 3)


def _question_table(args: argparse.Namespace, models: list[str], size: int, repeats: int,
                    workdir: Path) -> list[dict[str, Any]]:
    rows = []
    for kind in models:
        for config in QUESTION_CONFIGS:
            rows.append(_measure(args, kind, size, config, max(1, repeats - 1), str(workdir / f"q_{kind}.pt")))
    _add_ratios(rows)
    return rows


def _bars(rows: list[dict[str, Any]]) -> list[str]:
    """One line per target: the figure measured and whether it reached the target."""
    lines = []
    for (kind, size, config), (mem_bar, time_bar) in BARS.items():
        row = next((r for r in rows if (r["model"], r["size"], r["config"]) == (kind, size, config)), None)
        if row is None or "x eager time" not in row:
            lines.append(f"{kind} {size} {config}: not measured")
            continue
        if not isinstance(row.get("x eager mem"), (int, float)):  # --malloc user: times only
            ok = row["x eager time"] <= time_bar
            lines.append(f"{kind} {size} {config}: time {row['x eager time']}x eager (target {time_bar}): "
                         f"{verdict(ok)}")
            continue
        ok = row["x eager mem"] <= mem_bar and row["x eager time"] <= time_bar
        lines.append(f"{kind} {size} {config}: peak {row['x eager mem']}x eager (target {mem_bar}), time "
                     f"{row['x eager time']}x (target {time_bar}): {verdict(ok)}")
    for row in rows:
        if row["config"] == "engine bf16" and "label_agreement" in row:
            ok = row["label_agreement"] >= 0.995
            speed = row.get("x eager time")
            fp32 = next((r for r in rows if (r["model"], r["size"], r["config"]) ==
                         (row["model"], row["size"], "engine fp32") and "seconds" in r), None)
            speedup = f", {fp32['seconds'] / row['seconds']:.2f}x faster than engine fp32" if fp32 else ""
            lines.append(f"{row['model']} {row['size']} bf16: labels {100 * row['label_agreement']:.2f}% same as "
                         f"fp32 (target 99.5%): {verdict(ok)}; {speed}x eager time{speedup}")
        if "estimate_bytes" in row:
            ratio = row["estimate_bytes"] / max(1, row["peak_bytes"])
            lines.append(f"{row['model']} {row['size']} {row['config']}: estimate_peak {ratio:.3f}x measured "
                         f"(target 0.9..1.1): {verdict(0.9 <= ratio <= 1.1)}")
    return lines


def _charts(rows: list[dict[str, Any]], out: Path) -> list[Path]:
    """Memory and latency against input size, one line per model and configuration; bars when one size ran
    (`--quick`), where a line would be a dot."""
    paths = []
    sizes = sorted({r["size"] for r in rows})
    for key, label, scale, name in (("peak_bytes", "peak above baseline (MB)", 1e-6, "memory"),
                                    ("seconds", "latency (s)", 1.0, "latency")):
        series = {}
        for kind in sorted({r["model"] for r in rows}):
            for config in CONFIGS:
                points = sorted((r["size"], r[key] * scale) for r in rows
                                if r["model"] == kind and r["config"] == config and key in r)
                if points:
                    series[f"{kind} {config}"] = ([p[0] for p in points], [p[1] for p in points])
        path = out / f"bench_inference_{name}.png"
        if len(sizes) == 1 and series:
            paths.append(bar_chart({k: y[0] for k, (_, y) in series.items()}, path, horizontal=True,
                                   title=f"{label} at {sizes[0]}x{sizes[0]} px", y_label=label))
        elif series:
            paths.append(line_chart(series, path, title=f"{label} against input size",
                                    x_label="input size (px, square)", y_label=label))
    return paths
