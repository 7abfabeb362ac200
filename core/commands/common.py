"""Options and helpers every inferring command shares: model, device, engine, budget."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

from ..assets import default_model_path
from ..events import EventSink, JobEvent
from ..memory import MemoryMonitor, parse_bytes
from ..model.checkpoint import CheckpointError, LoadedModel
from ..model.sources import load_model as open_model_file
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
    """The given model file (.safetensors, .pt2, .onnx, .leanseg), or the shipped default; CommandError when bad."""
    if path is None:
        path = default_model_path()
        if not path.is_file():
            raise CommandError(
                f"no default model is installed (looked for {path}); pass --model PATH, or train one "
                "with `leanseg train` (see README, 'The default model')"
            )
    try:
        return open_model_file(path)
    except CheckpointError as err:
        raise CommandError(str(err)) from err


def inference_options(args: argparse.Namespace, want_probs: bool = False) -> InferenceOptions:
    """InferenceOptions from the parsed `add_inference_options` flags; ValueError names a bad value."""
    return InferenceOptions(
        device=args.device,
        engine=args.engine,
        precision=args.precision,
        memory_budget=args.memory_budget,
        tiling=args.tiling,
        want_probs=want_probs,
    )


def build_segmenter(args: argparse.Namespace, want_probs: bool = False) -> Segmenter:
    """Set --threads, load --model and build its Segmenter; CommandError for a bad model or option."""
    if args.threads:
        torch.set_num_threads(args.threads)
    loaded = load_model(args.model)
    try:
        return Segmenter(loaded, inference_options(args, want_probs))
    except ValueError as err:
        raise CommandError(str(err)) from err


def describe_segmenter(segmenter: Segmenter) -> str:
    """The line a command prints before it starts: `model PATH on DEVICE, engine ENGINE, PRECISION`."""
    options = segmenter.options
    return f"model {segmenter.loaded.path} on {segmenter.device}, engine {options.engine}, {options.precision}"


def report_error(err: Exception) -> int:
    print(f"leanseg: error: {err}", file=sys.stderr)
    return 2


MEMORY_LOG_SECONDS = 4 * 3600.0  # a --memory-log keeps the last 4 hours at 10 Hz (about 7 MB in memory)


def add_memory_log_option(parser: argparse.ArgumentParser) -> None:
    """`--memory-log FILE.csv`: the memory timeline with job marks (draw it with `leanseg plot-memory`)."""
    parser.add_argument("--memory-log", type=Path, default=None, metavar="FILE.csv",
                        help="write the memory timeline (10 Hz) with job marks as CSV; "
                             "draw it with `leanseg plot-memory FILE.csv --out FILE.png`")


@contextmanager
def memory_logging(path: Path | None, device: torch.device, sink: EventSink) -> Iterator[EventSink]:
    """Sample `device` memory at 10 Hz while the block runs; write the CSV to `path` at the end.

    Yields a sink that marks job events (start, tile, image, frame, done, error) on the timeline and
    passes every event on to `sink`. With `path` None it yields `sink` itself and records nothing.
    The CSV is written even when the block raises (a partial run is worth seeing).
    """
    if path is None:
        yield sink
        return
    if path.is_dir():
        raise CommandError(f"--memory-log {path} is a folder; give a file name such as {path / 'memory.csv'}")
    monitor = MemoryMonitor(device, rate_hz=10.0, capacity_s=MEMORY_LOG_SECONDS)

    def marking_sink(event: JobEvent) -> None:
        monitor.mark_event(event)
        sink(event)

    monitor.start()
    try:
        yield marking_sink
    finally:
        monitor.sample_now()
        monitor.close()
        written = monitor.export_csv(path)
        print(f"memory log ({monitor.source}, {len(monitor.snapshot()['time'])} samples) written to {written}")
