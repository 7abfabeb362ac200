"""`leanseg bench --train`: one training step's peak memory and time, plain vs memory-lean.

For MobileUNet and PlainUNet at the same batch and size: plain fp32, activation-checkpointed,
bf16 autocast, both; and beside them the eval-mode (no_grad) inference peak for the same input.
Checkpointing is what `leanseg train --checkpointing` does: the segments a cost model picks on the
batch (`plan_activation_checkpointing`). Tensors are channels_last, as `leanseg train` runs, unless
`--train-layout nchw`. Each configuration runs twice, each time in its own subprocess: the peak
with MALLOC_MMAP_THRESHOLD_ (RSS follows live tensors), the step time with glibc's default malloc
(as a training process runs; mapping every large tensor afresh costs page faults that nearly
double the step time, and more for recomputed activations).
"""
from __future__ import annotations

import argparse
import time
from typing import Any

import torch
import torch.nn.functional as F

from ..memory import format_bytes
from ..model import MobileUNet, MobileUNetConfig, PlainUNet, PlainUNetConfig
from ..train.checkpointing import plan_activation_checkpointing
from ..train.lean import autocast_for
from .measure import Probe, median_seconds, run_case
from .report import format_table, write_json

LAYOUTS = {"channels_last": torch.channels_last, "nchw": torch.contiguous_format}
CONFIGURATIONS = {  # name -> (checkpointing, precision)
    "train plain": (False, "fp32"),
    "train checkpointed": (True, "fp32"),
    "train bf16": (False, "bf16"),
    "train checkpointed+bf16": (True, "bf16"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("--train")
    group.add_argument("--train-batch", type=int, default=4, help="batch for --train (default 4)")
    group.add_argument("--train-size", type=int, default=256, help="square input for --train (default 256)")
    group.add_argument("--train-layout", choices=LAYOUTS, default="channels_last",
                       help="tensor layout for --train (default channels_last, as leanseg train)")


def _model(kind: str) -> MobileUNet | PlainUNet:
    return MobileUNet(MobileUNetConfig()) if kind == "MobileUNet" else PlainUNet(PlainUNetConfig())


def train_step_case(probe: Probe, kind: str, checkpointing: bool, precision: str, batch: int, size: int,
                    repeats: int, device: str = "cpu", layout: str = "channels_last",
                    measure: str = "memory", segments: list[str] | None = None) -> dict[str, Any]:
    """measure='memory': peak above (weights + optimiser state) of one forward + backward + step
    (and the median time of `repeats` more); 'time': median time of `repeats` steps.
    `segments`: checkpoint these (the memory run's plan)."""
    torch.manual_seed(0)
    dev = torch.device(device)
    model = _model(kind).to(dev).train().to(memory_format=LAYOUTS[layout])  # type: ignore[call-overload]
    x = torch.randn(batch, 3, size, size, device=dev).contiguous(memory_format=LAYOUTS[layout])
    plan = plan_activation_checkpointing(model, x, checkpointed=segments) if checkpointing else None
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    y = torch.randint(0, model.config.num_classes, (batch, size, size), device=dev)

    def step() -> None:
        with autocast_for(dev, precision):
            logits = model(x)
        loss = F.cross_entropy(logits.float(), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    step()  # warm-up: allocates the optimiser state, which the baseline then includes
    optimizer.zero_grad(set_to_none=True)
    notes = {"plan": plan.summary(), "segments": sorted(plan.checkpointed)} if plan else {}
    if measure == "time":
        return {**notes, "peak_bytes": 0, "seconds": median_seconds(step, repeats=repeats, warmup=1)}
    probe.start()
    step()
    peak = probe.peak_bytes()  # then the time as this run maps every tensor afresh (the old measure)
    return {**notes, "peak_bytes": peak, "mapped_seconds": median_seconds(step, repeats=repeats, warmup=0)}


def eval_case(probe: Probe, kind: str, batch: int, size: int, repeats: int, device: str = "cpu",
              layout: str = "channels_last") -> dict[str, Any]:
    """Eval-mode no_grad inference on the same model and input."""
    dev = torch.device(device)
    model = _model(kind).to(dev).eval().to(memory_format=LAYOUTS[layout])  # type: ignore[call-overload]
    x = torch.randn(batch, 3, size, size, device=dev).contiguous(memory_format=LAYOUTS[layout])
    with torch.no_grad():
        model(x)
        probe.start()
        model(x)
        peak = probe.peak_bytes()
        start = time.perf_counter()
        for _ in range(repeats):
            model(x)
    return {"peak_bytes": peak, "seconds": (time.perf_counter() - start) / repeats}


def run(args: argparse.Namespace) -> int:
    repeats = 1 if args.quick else 3
    batch, size = args.train_batch, args.train_size
    rows: list[dict[str, Any]] = []
    for kind in ("MobileUNet", "PlainUNet"):
        plain: dict[str, Any] = {}
        for name, (checkpointing, precision) in CONFIGURATIONS.items():
            print(f"{kind}: {name} ...", flush=True)
            case = {"kind": kind, "checkpointing": checkpointing, "precision": precision, "batch": batch,
                    "size": size, "repeats": repeats, "device": args.device, "layout": args.train_layout}
            result = run_case(f"{__name__}:train_step_case", {**case, "measure": "memory"}, threads=args.threads)
            timed = run_case(f"{__name__}:train_step_case", {**case, "measure": "time",
                             "segments": result.get("segments")}, threads=args.threads, user_malloc=True)
            result = {**result, "seconds": timed["seconds"]} if "error" not in timed else timed
            if "plan" in result:
                print(f"  {result['plan']}", flush=True)
            if name == "train plain":
                plain = result
            rows.append(_row(kind, name, result, plain))
        print(f"{kind}: eval no_grad ...", flush=True)
        result = run_case(f"{__name__}:eval_case", {"kind": kind, "batch": batch, "size": size, "repeats": repeats,
                                                    "device": args.device, "layout": args.train_layout},
                          threads=args.threads)
        rows.append(_row(kind, "eval no_grad", result, plain))
    print(f"\nOne training step, batch {batch} x 3 x {size} x {size} {args.train_layout}, {args.threads} threads, "
          f"{args.device} (peak and time mapped: MALLOC_MMAP_THRESHOLD_ run; time: default malloc run):\n")
    print(format_table(rows, ["model", "configuration", "peak", "x plain peak", "step s", "x plain time",
                              "x plain time mapped"]))
    path = write_json(args.out / "bench_train.json", {"batch": batch, "size": size, "threads": args.threads,
                                                      "device": args.device, "layout": args.train_layout,
                                                      "rows": rows})
    print(f"\nwritten {path}")
    return 0 if all("error" not in r for r in rows) else 1


def _row(kind: str, name: str, result: dict[str, Any], plain: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {"model": kind, "configuration": name}
    if "error" in result:
        return {**row, "peak": f"error: {result['error']}"}
    row.update(peak=format_bytes(result["peak_bytes"]), peak_bytes=result["peak_bytes"],
               seconds=result["seconds"], **{"step s": round(result["seconds"], 3)})
    row.update({key: result[key] for key in ("plan", "segments") if key in result})
    if plain.get("peak_bytes"):
        row["x plain peak"] = round(result["peak_bytes"] / plain["peak_bytes"], 3)
        row["x plain time"] = round(result["seconds"] / plain["seconds"], 3)
        if "mapped_seconds" in result and "mapped_seconds" in plain:
            row["mapped_seconds"] = result["mapped_seconds"]
            row["x plain time mapped"] = round(result["mapped_seconds"] / plain["mapped_seconds"], 3)
    return row
