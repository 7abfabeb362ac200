"""Options and helpers every inferring command shares: model, device, engine, budget."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from ..assets import default_model_path
from ..memory import parse_bytes
from ..model.checkpoint import CheckpointError, LoadedModel, load_checkpoint
from ..predict import ENGINES, PRECISIONS, TILING_MODES, InferenceOptions, Segmenter


class CommandError(Exception):
    """A user error a command reports as one line and exit code 2."""


def add_inference_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("inference")
    group.add_argument("--model", type=Path, help="checkpoint (.safetensors); default: the shipped CamVid model")
    group.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default auto)")
    group.add_argument("--engine", choices=ENGINES, default=InferenceOptions.engine,
                       help=f"memory-lean engine or plain PyTorch (default {InferenceOptions.engine})")
    group.add_argument("--precision", choices=PRECISIONS, default="fp32", help="default fp32")
    group.add_argument("--memory-budget", type=parse_bytes, default=None, metavar="SIZE",
                       help="e.g. 512MB; default: a fraction of free device memory")
    group.add_argument("--tiling", choices=TILING_MODES, default="auto", help="default auto")
    group.add_argument("--threads", type=int, default=None, help="CPU threads (default: torch's choice)")


def load_model(path: Path | None) -> LoadedModel:
    """The given checkpoint, or the shipped default; CommandError when absent or invalid."""
    if path is None:
        path = default_model_path()
        if not path.is_file():
            raise CommandError(
                f"no default model is installed (looked for {path}); pass --model PATH, or train one "
                "with `leanseg train` (see README, 'The default model')"
            )
    try:
        return load_checkpoint(path)
    except CheckpointError as err:
        raise CommandError(str(err)) from err


def build_segmenter(args: argparse.Namespace, want_probs: bool = False) -> Segmenter:
    if args.threads:
        torch.set_num_threads(args.threads)
    loaded = load_model(args.model)
    try:
        options = InferenceOptions(
            device=args.device,
            engine=args.engine,
            precision=args.precision,
            memory_budget=args.memory_budget,
            tiling=args.tiling,
            want_probs=want_probs,
        )
        return Segmenter(loaded, options)
    except ValueError as err:
        raise CommandError(str(err)) from err


def report_error(err: Exception) -> int:
    print(f"leanseg: error: {err}", file=sys.stderr)
    return 2
