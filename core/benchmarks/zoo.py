"""`leanseg bench --zoo DIR`: eager, engine fp32 / bf16 and ONNX Runtime on every model of a zoo folder.

Each NAME.pt2 in DIR (its NAME.onnx beside it for ONNX Runtime) and leanseg's own two U-Nets, at one square
size, on the CPU. Every configuration runs in two subprocesses: one with mapped malloc for the peak above
baseline and the agreement with eager on the sample images, one with glibc's defaults for the latency a
user's process sees (`--rounds N`: N of those, the ratios the median of the rounds'). Prints a table and
the issue's bars; writes bench_zoo.json and bench_zoo.png.
"""
from __future__ import annotations

import argparse
import importlib.util
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any

from ..memory import format_bytes
from .inference import _add_ratios, _bars
from .inference_cases import MODELS
from .measure import run_case
from .report import format_table, write_json
from .zoo_cases import sample_count
from .zoo_report import bar_lines, chart, geomean_lines

CASE = "leanseg.core.benchmarks.zoo_cases:zoo_case"
SHORT_CONFIGS = {"eager": "eager no_grad", "fp32": "engine fp32", "bf16": "engine bf16", "ort": "onnxruntime"}
COLUMNS = ("model", "config", "peak", "x eager mem", "seconds", "x ORT time", "max|dlogit|", "labels same",
           "eager nodes")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("--zoo DIR")
    group.add_argument("--zoo-models", default=None, metavar="NAME,...",
                       help=f"subset of the zoo's NAMEs and {', '.join(MODELS)} (default: all)")
    group.add_argument("--zoo-configs", default=",".join(SHORT_CONFIGS), metavar="CONFIG,...",
                       help=f"subset of: {', '.join(SHORT_CONFIGS)} (eager always runs: it is the reference)")
    group.add_argument("--size", type=int, default=1024, help="square input size, a multiple of 32 (default 1024)")
    group.add_argument("--repeats", type=int, default=3, help="timed runs per configuration, median (default 3)")
    group.add_argument("--rounds", type=int, default=1,
                       help="latency rounds: each times every configuration of a model again, each in a new "
                            "process; a ratio is the median of the rounds' ratios, so a shared machine's "
                            "changing load stays out of it (default 1)")


def zoo_models(folder: Path) -> dict[str, Path]:
    """NAME -> NAME.pt2 for every `.pt2` in `folder` (or `folder` itself, one NAME.pt2); raises ValueError naming
    the folder when there is none."""
    if folder.is_file() and folder.suffix == ".pt2":  # one model of the user's own
        return {folder.stem: folder}
    if folder.is_file():
        raise ValueError(f"{folder}: --zoo takes a NAME.pt2 (its NAME.onnx beside it adds ONNX Runtime) or a folder "
                         "of them; for another model file, `leanseg profile --model FILE` compares eager and engine")
    if not folder.is_dir():
        raise ValueError(f"{folder}: no such folder (--zoo takes a NAME.pt2 file or a folder of them, each with an "
                         "optional NAME.onnx beside it)")
    found = {path.stem: path for path in sorted(folder.glob("*.pt2"))}
    if not found:
        raise ValueError(f"{folder}: no .pt2 models in it (save one with torch.export.save(program, 'NAME.pt2'); "
                         "an NAME.onnx beside it adds ONNX Runtime to the comparison)")
    return found


def bf16_convolutions() -> bool:
    """Whether PyTorch's oneDNN runs bf16 convolutions on this CPU (else they raise at the first call)."""
    import torch

    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def _pick(text: str | None, valid: list[str], what: str) -> list[str]:
    if text is None:
        return valid
    items = [item.strip() for item in text.split(",") if item.strip()]
    unknown = [item for item in items if item not in valid]
    if unknown or not items:
        raise ValueError(f"unknown {what} {unknown or text!r}; valid: {', '.join(valid)}")
    return items


def run(args: argparse.Namespace) -> int:
    try:
        zoo = zoo_models(args.zoo)
        models = _pick(args.zoo_models, [*zoo, *MODELS], "--zoo-models")
        configs = [SHORT_CONFIGS[c] for c in _pick(args.zoo_configs, list(SHORT_CONFIGS), "--zoo-configs")]
        if args.size < 32 or args.size % 32 or args.repeats < 1 or args.rounds < 1:
            raise ValueError(f"--size must be a positive multiple of 32 (got {args.size}), --repeats >= 1 "
                             f"(got {args.repeats}) and --rounds >= 1 (got {args.rounds})")
    except ValueError as err:
        print(f"leanseg: error: {err}")
        return 2
    if str(getattr(args, "device", "cpu")).startswith("cuda"):
        print("--zoo measures on the CPU (ONNX Runtime's CPU provider is the anchor); --device is not used")
    if "eager no_grad" not in configs:
        configs.insert(0, "eager no_grad")  # the reference every ratio and comparison needs
    notes = [f"{args.size}x{args.size}, {args.threads} threads, median of {args.repeats} after 2 warm-ups"
             + (f", {args.rounds} latency rounds (ratios: median of the rounds')" if args.rounds > 1 else "")
             + f"; agreement on {sample_count()} sample images (assets/samples) stretched to {args.size}x{args.size}"]
    if "onnxruntime" in configs and importlib.util.find_spec("onnxruntime") is None:
        notes.append("onnxruntime skipped: install the bench extra (pip install 'leanseg[bench]')")
        configs.remove("onnxruntime")
    if "engine bf16" in configs and not bf16_convolutions():
        notes.append("engine bf16 skipped: this CPU has no bf16 convolution in oneDNN (needs avx512bw + avx512vl "
                     "+ avx512dq, or avx_ne_convert)")
        configs.remove("engine bf16")
    print("\n".join(notes), flush=True)
    workdir = Path(tempfile.mkdtemp(prefix="leanseg-bench-zoo-"))
    rows = []
    try:
        for model in models:
            model_rows = [_measure(args, model, zoo, config, workdir) for config in configs]
            for _ in range(args.rounds - 1):
                for row in model_rows:
                    _time_again(args, model, zoo, row, workdir)
            rows.extend(model_rows)
            for reference in workdir.glob(f"{model}_eager_*.pt"):
                reference.unlink()  # 50 MB per sample at 1024: keep one model's at a time
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    _add_ratios(rows)
    _median_round_ratios(rows)
    print(format_table(rows, COLUMNS))
    zoo_rows = [row for row in rows if row["model"] in zoo]
    own_rows = [row for row in rows if row["model"] in MODELS]
    summary = geomean_lines(zoo_rows) + bar_lines(zoo_rows) + (_bars(own_rows) if own_rows else [])
    print("\n" + "\n".join(summary))
    payload = {"size": args.size, "threads": args.threads, "repeats": args.repeats, "rounds": args.rounds,
               "zoo": str(args.zoo),
               "notes": notes, "rows": rows, "summary": summary,
               "malloc": "peak: MALLOC_MMAP_THRESHOLD_=65536 (VmHWM above baseline); seconds: glibc defaults"}
    path = write_json(args.out / "bench_zoo.json", payload)
    picture = chart(rows, args.out / "bench_zoo.png")
    print(f"\nwrote {path}" + (f", {picture}" if picture else ""))
    return 0


def _measure(args: argparse.Namespace, model: str, zoo: dict[str, Path], config: str,
             workdir: Path) -> dict[str, Any]:
    print(f"  {model} {config} ...", flush=True)
    kwargs = _case_kwargs(args, model, zoo, config, workdir)
    onnx = Path(kwargs["onnx"])
    row: dict[str, Any] = {"model": model, "size": args.size, "config": config}
    if config == "onnxruntime" and model in zoo and not onnx.is_file():
        return {**row, "peak": f"skipped: no {onnx.name} beside {zoo[model].name}"}
    peak = run_case(CASE, {**kwargs, "measure": "peak"}, threads=args.threads)
    latency = run_case(CASE, {**kwargs, "measure": "latency"}, threads=args.threads, user_malloc=True)
    failed = peak.get("error") or latency.get("error")
    if failed:
        print(f"    failed: {str(failed)[-300:]}", flush=True)
        return {**row, "peak": f"error: {str(failed).split(' | ')[-1][:100]}", "error": failed}
    row.update(peak)
    row["seconds_mapped"] = peak["seconds"]  # what mapped malloc's page faults cost: not the figure users see
    row["seconds"] = latency["seconds"]
    row["round_seconds"] = [latency["seconds"]]
    row["peak"] = format_bytes(peak["peak_bytes"])
    if "max_abs_diff" in peak:
        row["max|dlogit|"] = f"{peak['max_abs_diff']:.1e}"
        row["labels same"] = f"{100 * peak['label_agreement']:.3f}%"
    if "self_label_flips" in peak:  # eager against itself at another thread count
        row["max|dlogit|"] = f"{peak['self_max_abs_diff']:.1e} (itself)"
        row["labels same"] = f"{peak['self_label_flips']} px flip at {peak['self_threads']} thread(s)"
    if "whole_model_fallback" in peak:
        row["eager nodes"] = "whole model" if peak["whole_model_fallback"] else peak["eager_nodes"]
    print(f"    peak {row['peak']}, {row['seconds']:.3f} s ({row['seconds_mapped']:.3f} s mapped)"
          + (f", max|dlogit| {row['max|dlogit|']}, labels {row['labels same']}" if "labels same" in row else ""),
          flush=True)  # the figures reach the log as they come, even if the run is stopped
    return row


def _case_kwargs(args: argparse.Namespace, model: str, zoo: dict[str, Path], config: str,
                 workdir: Path) -> dict[str, Any]:
    onnx = zoo[model].with_suffix(".onnx") if model in zoo else workdir / f"{model}.onnx"
    return {"model": str(zoo.get(model, model)), "size": args.size, "config": config, "repeats": args.repeats,
            "reference": str(workdir / f"{model}_eager"), "onnx": str(onnx), "threads": args.threads}


def _time_again(args: argparse.Namespace, model: str, zoo: dict[str, Path], row: dict[str, Any],
                workdir: Path) -> None:
    """One more latency round of a measured row, in a new process with glibc's defaults."""
    if "round_seconds" not in row:  # skipped or failed in the first round
        return
    kwargs = _case_kwargs(args, model, zoo, row["config"], workdir)
    latency = run_case(CASE, {**kwargs, "measure": "latency"}, threads=args.threads, user_malloc=True)
    if latency.get("error"):
        print(f"  {model} {row['config']}: a latency round failed: {str(latency['error'])[-300:]}", flush=True)
        return
    row["round_seconds"].append(latency["seconds"])
    print(f"  {model} {row['config']} round {len(row['round_seconds'])}: {latency['seconds']:.3f} s", flush=True)


def _median_round_ratios(rows: list[dict[str, Any]]) -> None:
    """With --rounds N: seconds is the median of the rounds', and each 'x eager/ORT time' the median of the
    ratios of the two configurations' times in the same round (where both have every round)."""
    for row in rows:
        mine = row.get("round_seconds", [])
        if len(mine) < 2:
            continue
        row["seconds"] = statistics.median(mine)
        for name, config in (("eager", "eager no_grad"), ("ORT", "onnxruntime")):
            base = next((r for r in rows if (r["model"], r["config"]) == (row["model"], config)
                         and len(r.get("round_seconds", [])) == len(mine)), None)
            if base is not None:
                row[f"x {name} time"] = round(statistics.median(
                    a / b for a, b in zip(mine, base["round_seconds"])), 3)
