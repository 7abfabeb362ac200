"""Options and helpers every inferring command shares: model, device, engine, budget."""
from __future__ import annotations

import argparse
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import torch

from ..assets import default_model_path
from ..engine.multiscale import SUGGESTED_SCALES, format_scales
from ..events import EventSink, JobEvent
from ..io.images import DEFAULT_MAX_PIXELS, set_max_pixels
from ..io.outputs import OutputPathError, check_output_file
from ..memory import MemoryMonitor, parse_bytes
from ..memory.log import sidecar_path, written_as_memory_log
from ..model.card import default_input
from ..model.catalog import display_name
from ..model.checkpoint import CheckpointError, LoadedModel
from ..model.model_names import ModelNameError, find_model
from ..model.sources import load_model as open_model_file
from ..model.sources import size_range_phrase
from ..predict import ENGINES, MIRROR_MODES, PRECISIONS, TILING_MODES, InferenceOptions, Segmenter
from ..segment_tiled import check_budget


class CommandError(Exception):
    """A user error a command reports as one line and exit code 2."""


def size_argument(text: str) -> int:
    """argparse type for byte sizes ('512MB', '1.5GB', '10TB'); its error message says how to write one."""
    try:
        return parse_bytes(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def positive_int(text: str) -> int:
    """argparse type for counts that must be 1 or more (threads, pixels): 1000000, 1,000,000, 1_000_000 or 1e6."""
    plain = text.replace("_", "").replace(",", "") if re.fullmatch(r"\d{1,3}(,\d{3})+|[^,]*", text) else text
    try:
        value = int(plain) if plain.isdigit() or plain.startswith("-") else int(float(plain))
        if not float(plain).is_integer():
            raise ValueError(plain)
    except (ValueError, OverflowError):
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def add_inference_options(parser: argparse.ArgumentParser, mirror: str = "off") -> None:
    """The inference flags every command that infers shares; `mirror`: this command's default --mirror."""
    group = parser.add_argument_group("inference")
    group.add_argument("--model", metavar="MODEL",
                       help="a .pt2 or .onnx graph (card NAME.json beside it), a .leanseg bundle or a leanseg "
                            ".safetensors checkpoint, or the name of an installed one (`leanseg models`); "
                            "default: the shipped CamVid model")
    group.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default auto)")
    group.add_argument("--engine", choices=ENGINES, default=InferenceOptions.engine,
                       help=f"memory-lean engine or plain PyTorch (default {InferenceOptions.engine})")
    group.add_argument("--precision", choices=PRECISIONS, default="fp32",
                       help="bf16 runs faster where the CPU (AVX512-BF16, AMX) or GPU has it natively; its labels "
                            "agree with fp32 on about 99.9%% of pixels with the default model (default fp32)")
    group.add_argument("--memory-budget", type=size_argument, default=None, metavar="SIZE",
                       help="e.g. 512MB; default: a fraction of free device memory")
    group.add_argument("--tiling", choices=TILING_MODES, default="auto", help="default auto")
    group.add_argument("--mirror", choices=MIRROR_MODES, default=mirror,
                       help=f"flip: average each tile's logits with its left-right mirror's, a test-time augmentation "
                            f"that costs twice the time (default {mirror})")
    group.add_argument("--scales", type=float, nargs="+", default=[1.0], metavar="S",
                       help=f"sizes each image runs at, its class probabilities averaged: multi-scale averaging, "
                            f"e.g. --scales {format_scales(SUGGESTED_SCALES)} (about 3x the time); tiles, when the "
                            f"budget needs them, are fast ones (default 1)")
    group.add_argument("--threads", type=positive_int, default=None, metavar="N",
                       help="CPU threads (default: torch's choice)")
    group.add_argument("--max-pixels", type=positive_int, default=DEFAULT_MAX_PIXELS, metavar="N",
                       help=f"refuse images larger than N pixels before decoding them (default {DEFAULT_MAX_PIXELS:,})")


def model_file(model: str | Path | None) -> Path:
    """The file a --model value names (`find_model`: a path, or an installed model's file or card name), or the
    shipped default for None; CommandError when no installed model has the name, or no default is installed."""
    if model is not None:
        try:
            return find_model(model)
        except ModelNameError as err:
            raise CommandError(str(err)) from None
    path = default_model_path()
    if not path.is_file():
        raise CommandError(
            f"no default model is installed (looked for {path}); pass --model PATH, or train one "
            "with `leanseg train` (see README, 'The default model')"
        )
    return path


def load_model(model: str | Path | None) -> LoadedModel:
    """Open the model a --model value names (.safetensors, .pt2, .onnx, .leanseg; see `model_file`), or the
    shipped default; CommandError when there is none or it cannot be opened."""
    return _open_model(model_file(model))


def _open_model(path: Path) -> LoadedModel:
    """The model file at `path`, opened; CommandError naming it when it cannot be."""
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
        mirror=getattr(args, "mirror", "off"),
        scales=tuple(getattr(args, "scales", (1.0,))),
    )


LOADING_NOTE_AFTER_S = 1.0  # a model load that takes longer says so on a terminal's stderr


def build_segmenter(args: argparse.Namespace, want_probs: bool = False) -> Segmenter:
    """Set --threads, load --model and build its Segmenter; CommandError for a bad model or option."""
    if args.threads:
        torch.set_num_threads(args.threads)
    set_max_pixels(getattr(args, "max_pixels", DEFAULT_MAX_PIXELS))
    path = model_file(args.model)
    slow = threading.Timer(LOADING_NOTE_AFTER_S, lambda: print(f"loading model {path}…", file=sys.stderr, flush=True))
    if sys.stderr.isatty():  # a person waits: a .pt2 or .onnx takes seconds to open; a quick load says nothing
        slow.start()
    try:
        loaded = _open_model(path)  # found above
    finally:
        slow.cancel()
    try:
        segmenter = Segmenter(loaded, inference_options(args, want_probs))
        check_budget(segmenter, "logits" if want_probs else "labels")  # a budget below the smallest tile
    except ValueError as err:
        raise CommandError(str(err)) from err
    return segmenter


def describe_segmenter(segmenter: Segmenter) -> str:
    """The line a command prints before it starts: `model [NAME (PATH; ]K classes[, card CARD]) on DEVICE,
    engine ENGINE, PRECISION[, mirror averaging]`; `model PATH (K classes...)` when the card's name is the file's."""
    options = segmenter.options
    provenance = segmenter.info.provenance
    card = provenance.get("card")
    in_file = provenance.get("format") in ("bundle", "leanseg")  # its card travels inside it
    card_note = f", card {Path(card).name}" if card and card != "defaults" and not in_file else ""
    details = f"{segmenter.info.config.num_classes} classes{card_note}{size_range_phrase(segmenter.info.config)}"
    path = segmenter.loaded.path
    name = str(provenance.get("name") or "")
    if path is None:
        named = f"{name} ({details})" if name else f"({details})"
    elif display_name(path, name) == path.name:  # the card's name says no more than the file's
        named = f"{path} ({details})"
    else:
        named = f"{name} ({path}; {details})"
    line = f"model {named} on {segmenter.device}, engine {options.engine}, {options.precision}"
    for averaging in options.averaging:
        line += f", {averaging}" + (" (--mirror off: half the time)" if averaging == "mirror averaging" else "")
    notes = list(segmenter.notes)
    if segmenter.info.provenance.get("card") == "defaults":
        path = segmenter.loaded.path
        notes.append(f"no card beside {path}: default class names and palette, "
                     f"{default_input(segmenter.info.config.in_channels)}; if the "
                     f"net expects otherwise, write {path.with_suffix('.json').name if path else 'NAME.json'} "
                     "(README: 'The model card')")
    return "\n".join([line, *(f"note: {note}" for note in notes)])


def report_error(err: Exception) -> int:
    """Print `leanseg: error: ...` (one line) on stderr; returns exit code 2."""
    print(f"leanseg: error: {err}", file=sys.stderr)
    return 2


def _say_on_stderr(note: str) -> None:
    print(f"\n{note}", file=sys.stderr, flush=True)


class CtrlC:
    """Ctrl-C while a job runs, in stages: the i-th press sets `pressed[i]` (jobs check it between tiles, images
    or frames) and says `notes[i]`; one press more raises KeyboardInterrupt as usual. Once the job is `over()`,
    Ctrl-C is ignored until the block ends (keep the summary inside it), so a late one cannot turn a finished
    job's exit code into 130. The previous handler is restored on exit."""

    def __init__(self, notes: Sequence[str], say: Callable[[str], None] = _say_on_stderr) -> None:
        self.notes, self._say = tuple(notes), say
        self.pressed = [threading.Event() for _ in self.notes]
        self._over = threading.Event()
        self._previous: Any = None

    def __enter__(self) -> CtrlC:
        self._previous = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def __exit__(self, *exc: object) -> None:
        signal.signal(signal.SIGINT, self._previous)

    def over(self) -> None:
        self._over.set()

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        if self._over.is_set():
            return
        stage = next((i for i, event in enumerate(self.pressed) if not event.is_set()), None)
        if stage is None:
            raise KeyboardInterrupt
        self.pressed[stage].set()
        self._say(self.notes[stage])


MEMORY_LOG_SECONDS = 4 * 3600.0  # a --memory-log keeps the last 4 hours at 10 Hz (about 7 MB in memory)


def add_memory_log_option(parser: argparse.ArgumentParser) -> None:
    """`--memory-log FILE.csv`: the memory timeline with job marks (draw it with `leanseg plot-memory`)."""
    parser.add_argument("--memory-log", type=Path, default=None, metavar="FILE.csv",
                        help="write the memory timeline (10 Hz) with job marks as CSV; "
                             "draw it with `leanseg plot-memory FILE.csv --out FILE.png`")


def check_memory_log(path: Path | None, reserved: Sequence[tuple[Path, str]] = ()) -> None:
    """OutputPathError, before the model loads, unless the --memory-log CSV and its JSON sidecar beside it can be
    written; the message begins with the option and the path given (`--memory-log PATH: FOLDER: cannot write ...`).
    The log must be named NAME.csv, and only an earlier memory log is replaced: an input image, a model's card
    (NAME.json, where the sidecar goes) or any other file is refused, as are the files in `reserved` (each with
    what it is: the run writes them itself). Call it beside `--out`'s check: the log is written at the end."""
    if path is None:
        return
    named = f"--memory-log {path}"
    check_output_file(path, f"{named}:", f"{named} is a folder; give a file name such as {path / 'memory.csv'}")
    require_csv_name(path)
    sidecar = sidecar_path(path)
    if sidecar.is_dir():
        raise OutputPathError(f"{named}: its JSON sidecar {sidecar} is a folder; move it or choose another name")
    for file, what in ((path, "it"), (sidecar, f"its JSON sidecar {sidecar}")):
        for other, other_is in reserved:
            if file.resolve() == other.resolve():
                raise OutputPathError(f"{named}: {what} would replace {other_is}; choose another name")
        if file.is_file() and not written_as_memory_log(file):
            raise OutputPathError(f"{named}: {what} already exists and is not a leanseg memory log, so it is not "
                                  "replaced; choose another name")


def require_csv_name(path: Path | None) -> None:
    """OutputPathError unless the --memory-log file is named NAME.csv (so it cannot land on an image or output)."""
    if path is not None and path.suffix.lower() != ".csv":
        raise OutputPathError(f"--memory-log {path}: a memory log is a CSV file; give a name ending in .csv, such "
                              f"as {path.with_suffix('.csv').name}")


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
