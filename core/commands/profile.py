"""`leanseg profile --model PATH --size 1024 [--out DIR]`: where the memory goes, in training and at
test time: per-step profiles (eager and engine), lower bounds, and the comparison table, each
configuration in its own process. Writes memory_lab.json and charts (PNG, or --chart-format svg/pdf)."""
from __future__ import annotations

import argparse
import signal
import threading
from pathlib import Path
from types import FrameType

from ..benchmarks.report import format_table
from ..device import resolve_device
from ..events import JobCancelled, JobEvent
from ..memory import format_bytes
from ..model.checkpoint import CheckpointError
from ..model.model_names import find_model
from ..model.sources import load_model
from ..profile import CONFIGURATION_NAMES, LabRequest, LabResult, ModelSpec, default_spec, run_lab, write_lab
from ..profile.records import MemoryProfile
from . import SUMMARIES
from .common import report_error
from .options import HELP_FORMATTER, add_chart_format_option, add_device_option

TOLERANCE = 0.10  # the profile should explain the measured peak within this share


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("profile", help=SUMMARIES["profile"],
                            description=__doc__, formatter_class=HELP_FORMATTER)
    parser.add_argument("--model", default=None,
                        help="a .safetensors checkpoint, .pt2, .onnx or .leanseg, or an installed model's name; "
                             "default: the shipped model, else MobileUNet's default config")
    parser.add_argument("--size", type=int, default=1024, help="square input side in pixels")
    parser.add_argument("--out", type=Path, default=Path("out/profile"), help="folder for JSON and charts")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per configuration (median)")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads per configuration")
    add_device_option(parser)
    add_chart_format_option(parser)
    parser.add_argument("--configs", default=",".join(CONFIGURATION_NAMES),
                        help="comma-separated subset of: " + ", ".join(CONFIGURATION_NAMES))
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        if args.model is not None:
            args.model = find_model(args.model)  # a path, or an installed model's file or card name
            if not args.model.is_file():
                raise ValueError(f"--model {args.model}: no such file")
            try:  # said once here, not once per configuration's subprocess
                load_model(args.model)
            except CheckpointError as err:
                raise ValueError(str(err)) from None
            spec, which = ModelSpec(str(args.model)), f"model {args.model}"
        else:
            spec, which = default_spec()
        args.device = str(resolve_device(args.device))  # 'auto' -> cpu or cuda:0, as the lab records it
        configs = tuple(name.strip() for name in args.configs.split(",") if name.strip())
        request = LabRequest(spec, size=args.size, repeats=args.repeats, device=args.device, threads=args.threads,
                             configurations=configs)
    except ValueError as err:  # ModelNameError too
        return report_error(err)
    print(f"profiling {which} at {args.size}x{args.size} on {args.device}", flush=True)
    cancel = threading.Event()

    def on_interrupt(signum: int, frame: FrameType | None) -> None:
        cancel.set()

    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        result = run_lab(request, cancel=cancel, on_event=_print_event)
    except JobCancelled:
        print("cancelled; nothing written")
        return 130
    finally:
        signal.signal(signal.SIGINT, previous)
    print()
    print(format_table(table_rows(result), ["configuration", "peak", "x no_grad peak", "seconds", "x no_grad time"]))
    print()
    print("\n".join(explanation(result)))
    for path in write_lab(result, args.out, chart_format=args.chart_format):
        print(f"written {path}")
    failed = [r for r in result.rows if "error" in r]
    return 1 if failed or result.profile_error else 0


def _print_event(event: JobEvent) -> None:
    if event.kind == "info" and event.index is not None and event.count:
        print(f"[{event.index + 1}/{event.count}] {event.message}", flush=True)
    elif event.kind in ("start", "cancelled"):
        print(event.message, flush=True)


def table_rows(result: LabResult) -> list[dict[str, object]]:
    """One printable row per configuration, with ratios to eval no_grad."""
    reference = result.row("eval no_grad")
    rows: list[dict[str, object]] = []
    for row in result.rows:
        if "error" in row:
            rows.append({"configuration": row["name"], "peak": f"error: {row['error']}"})
            continue
        printed: dict[str, object] = {"configuration": row["name"], "peak": format_bytes(row["peak_bytes"]),
                                      "seconds": round(row["seconds"], 3)}
        if reference and "error" not in reference and reference["peak_bytes"] > 0:
            printed["x no_grad peak"] = round(row["peak_bytes"] / reference["peak_bytes"], 3)
            printed["x no_grad time"] = round(row["seconds"] / reference["seconds"], 3)
        rows.append(printed)
    return rows


def explanation(result: LabResult) -> list[str]:
    """Profile against measurement, side by side; what sets each peak; the distance to the bounds."""
    if result.profile_error:
        return [f"profile failed: {result.profile_error}"]
    if result.eager is None or result.engine is None or result.bounds is None:
        return ["no profile"]
    lines = ["profile vs measured peak (above baseline):"]
    lines += _compare("eager no_grad", result.eager, result.row("eval no_grad"))
    lines += _compare("engine fp32", result.engine, result.row("engine fp32"))
    lines += ["", "peak steps:"]
    lines += _peak_lines(result.eager) + _peak_lines(result.engine)
    lines += [f"  engine: {note}" for note in result.engine.notes if note.startswith("peak ")]
    bounds, engine = result.bounds, result.engine.peak_bytes
    lines += ["", f"lower bound, blocks whole: {format_bytes(bounds.whole_bytes)} (at {bounds.whole_step})",
              f"lower bound, in pieces:    {format_bytes(bounds.pieces_bytes)} (at {bounds.pieces_step})",
              f"engine peak {format_bytes(engine)} = {engine / max(1, bounds.pieces_bytes):.2f} x the bound in pieces "
              f"(+{format_bytes(engine - bounds.pieces_bytes)}), "
              f"{engine / max(1, bounds.whole_bytes):.2f} x the bound with blocks whole"]
    return lines


def _compare(name: str, profile: MemoryProfile, row: dict[str, object] | None) -> list[str]:
    if row is None or "error" in row:
        return [f"  {name}: profile {format_bytes(profile.peak_bytes)}, not measured"]
    measured = int(row["peak_bytes"])  # type: ignore[call-overload]
    error = (profile.peak_bytes - measured) / max(1, measured)
    verdict = "within" if abs(error) <= TOLERANCE else "OUTSIDE"
    return [f"  {name}: profile {format_bytes(profile.peak_bytes)} vs measured {format_bytes(measured)} "
            f"({error:+.1%}, {verdict} {TOLERANCE:.0%})"]


def _peak_lines(profile: MemoryProfile) -> list[str]:
    step = profile.peak_step
    if step is None:
        return []
    lines = [f"  {profile.mode} ({profile.dtype}): step {step.index} {step.layer}: {format_bytes(step.peak_bytes)} "
             f"= tensors {format_bytes(step.peak_bytes - step.workspace_bytes)} + hidden/band temporaries "
             f"{format_bytes(step.workspace_bytes)}; alive while it ran:"]
    for tensor in sorted(step.running, key=lambda t: -t.nbytes)[:6]:
        lines.append(f"      {format_bytes(tensor.nbytes):>9}  {tensor.layer}  {list(tensor.shape)} {tensor.dtype}")
    return lines
