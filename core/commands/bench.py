"""`leanseg bench`: inference (default), `--train` (training step), `--sizes` (tiling, large images), `--zoo DIR`."""
from __future__ import annotations

import argparse
import importlib
from pathlib import Path

from ..device import resolve_device
from . import SUMMARIES
from .common import report_error
from .options import HELP_FORMATTER, add_device_option

# Each mode lives in its own module in leanseg.core.benchmarks and defines add_arguments(parser), run(args).
MODES = {"inference": "inference", "train": "training", "sizes": "tiling", "zoo": "zoo"}


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("bench", help=SUMMARIES["bench"],
                            description=__doc__, formatter_class=HELP_FORMATTER)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--train", action="store_true", help="benchmark one training step (plain/checkpointed/bf16)")
    mode.add_argument("--sizes", type=str, default=None, metavar="N,N,...",
                      help="tiling benchmark at these square sizes, e.g. 1024,2048,4096,8192")
    mode.add_argument("--zoo", type=Path, default=None, metavar="DIR",
                      help="every NAME.pt2 (+ NAME.onnx) in DIR, or one NAME.pt2 of your own, and leanseg's U-Nets: "
                           "eager, engine, ONNX Runtime")
    parser.add_argument("--out", type=Path, default=Path("out/bench"), help="folder for JSON and PNG")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads per configuration")
    add_device_option(parser)
    parser.add_argument("--quick", action="store_true", help="fewer sizes and repeats, for a smoke test")
    for module in MODES.values():
        try:
            importlib.import_module(f"..benchmarks.{module}", __package__).add_arguments(parser)
        except ModuleNotFoundError:
            continue
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        args.device = str(resolve_device(args.device))  # 'auto' -> cpu or cuda:0, as the results record it
    except ValueError as err:
        return report_error(err)
    mode = "train" if args.train else "sizes" if args.sizes else "zoo" if args.zoo else "inference"
    try:
        module = importlib.import_module(f"..benchmarks.{MODES[mode]}", __package__)
    except ModuleNotFoundError:
        print(f"leanseg: error: the {mode} benchmark is not available in this build")
        return 2
    return int(module.run(args) or 0)
