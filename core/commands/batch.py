"""`leanseg batch IN_DIR --out OUT_DIR`: segment a folder; run it again to resume where it stopped.

Per image: NAME_labels.png (class index per pixel), NAME_overlay.png (unless --no-overlay), with --probs
NAME_probs.npy ((K, H, W) float16); sub-folders are mirrored with --recursive. OUT_DIR also gets
summary.csv (one row per image) and manifest.json (what is finished). Files that fail are listed
and skipped. Ctrl-C stops after the current image (twice: at once); nothing is left half-written.
"""
from __future__ import annotations

import argparse
import re
import sys
import threading
from pathlib import Path

from ..cluster.ray_batch import RayOptions
from ..events import JobEvent
from ..io.images import ALPHA_IGNORED
from ..io.outputs import OutputPathError
from ..io.video_probe import VIDEO_SUFFIXES
from ..jobs.batch import BatchSummary, describe_batch_os_error, require_writable_output, run_batch
from ..jobs.batch_plan import BatchSettings, require_images
from ..jobs.folder_lock import FolderLock
from ..jobs.manifest import MANIFEST_NAME, SUMMARY_NAME, ImageRecord, ManifestError
from ..memory import format_bytes, peak_label
from . import SUMMARIES
from .batch_ray import add_ray_options, check_ray_arguments, ray_requested, run_on_ray
from .common import (
    CommandError,
    CtrlC,
    add_inference_options,
    add_memory_log_option,
    build_segmenter,
    check_memory_log,
    describe_segmenter,
    memory_logging,
    report_error,
)
from .options import HELP_FORMATTER, SEGMENT_EXIT_CODES, add_overlay_options, add_probs_option
from .progress import JobProgress

CTRL_C_NOTES = ("stopping after the current image (Ctrl-C again to stop at once)",
                "stopping now; the image in flight will be redone on resume")  # then a third raises
_NUMBER = re.compile(r"\d[\d.,]*(?:e[-+]?\d+)?")  # the figures that differ between notes of one kind


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("batch", help=SUMMARIES["batch"], description=__doc__,
                            epilog=SEGMENT_EXIT_CODES, formatter_class=HELP_FORMATTER)
    parser.add_argument("in_dir", type=Path, metavar="IN_DIR", help="folder of images (never modified)")
    parser.add_argument("--out", type=Path, required=True, metavar="OUT_DIR", help="output folder (created)")
    parser.add_argument("--recursive", action="store_true", help="include sub-folders, mirrored in OUT_DIR")
    add_overlay_options(parser)
    add_probs_option(parser)
    parser.add_argument("--overwrite", action="store_true",
                        help="redo every image and replace existing outputs (default: resume, replace nothing)")
    add_inference_options(parser, mirror="flip")
    add_memory_log_option(parser)
    add_ray_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        if args.in_dir.is_file():  # BatchSettings would say only "not a folder"
            what, command = ("a video", "video") if args.in_dir.suffix.lower() in VIDEO_SUFFIXES else \
                ("image files", "segment")
            raise CommandError(f"{args.in_dir}: is a file, not a folder (segment {what} with `leanseg {command}`)")
        settings = BatchSettings(args.in_dir, args.out, recursive=args.recursive, write_overlay=args.overlay,
                                 overlay_alpha=args.alpha, write_probs=args.probs, overwrite=args.overwrite)
        ray_options = check_ray_arguments(args) if ray_requested(args) else None
        require_images(settings)  # before the lock creates OUT_DIR and before the model loads
        require_writable_output(settings)
        check_memory_log(args.memory_log, [(settings.out_dir / SUMMARY_NAME, f"the batch's {SUMMARY_NAME}"),
                                           (settings.out_dir / MANIFEST_NAME, f"the batch's {MANIFEST_NAME}")])
        lock = FolderLock(settings.out_dir, on_note=lambda note: print(note, file=sys.stderr, flush=True))
        with lock:  # taken before the model is built, so a second run on this folder is refused at once
            return _run_locked(args, settings, ray_options)
    except (CommandError, ValueError, ManifestError) as err:
        return report_error(err)
    except OutputPathError as err:  # names the folder already
        return report_error(CommandError(str(err)))
    except OSError as err:
        return report_error(CommandError(describe_batch_os_error(args.out, err)))


def _run_locked(args: argparse.Namespace, settings: BatchSettings, ray_options: RayOptions | None) -> int:
    try:
        segmenter = None if ray_options is not None else build_segmenter(args, want_probs=args.probs)
    except (CommandError, ValueError) as err:
        return report_error(err)
    if segmenter is not None:
        print(describe_segmenter(segmenter))
    sink = _ConsoleSink()
    with CtrlC(CTRL_C_NOTES) as ctrl_c:
        stop, cancel = ctrl_c.pressed
        try:
            if ray_options is not None:
                summary = run_on_ray(args, settings, ray_options, cancel=cancel, stop_after_current=stop,
                                     on_event=sink)
            else:
                assert segmenter is not None
                with memory_logging(args.memory_log, segmenter.device, sink) as on_event:
                    summary = run_batch(settings, segmenter, cancel=cancel, stop_after_current=stop,
                                        on_event=on_event)
        except (ManifestError, CommandError) as err:
            return report_error(err)
        finally:
            ctrl_c.over()
            sink.close()
        _print_summary(summary, sink.notes_said)
    if summary.cancelled:
        return 130
    return 0 if summary.all_ok else 1


class _ConsoleSink:
    """Progress bar on stderr for image events; errors as lines, and an image's note the first time one of its
    kind comes (the rest are counted at the end). Called from two threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._progress = JobProgress("batch", unit="img")
        self.notes_said: set[str] = set()  # kinds of note (`_note_kinds`) already given a line

    def __call__(self, event: JobEvent) -> None:
        with self._lock:
            if event.kind == "start":
                self._progress.start(event)
            elif event.kind in ("image", "error") and self._progress.bar is not None:
                if event.kind == "error":
                    self._line(f"failed{' (the batch goes on)' if event.more_follow else ''}: {event.message}")
                self._progress.advance(postfix=Path(event.path).name if event.path else "")
            elif event.kind in ("warning", "plan"):
                self._line(event.message)
            elif event.data.get("note") or event.data.get("alpha_ignored"):
                kinds = _note_kinds(event.data.get("note") or ALPHA_IGNORED).keys()
                if not kinds <= self.notes_said:
                    self.notes_said.update(kinds)
                    self._line(event.message)

    def _line(self, message: str) -> None:
        self._progress.note(message, sys.stderr)  # above the bar on a terminal

    def close(self) -> None:
        with self._lock:
            self._progress.close()


def _print_summary(summary: BatchSummary, notes_said: set[str]) -> None:
    print(_summary_line(summary))
    for line in _note_lines(summary.ok, notes_said):
        print(line)
    for note in summary.not_read_notes():
        print(note)
    if summary.failed:  # each was said as it failed; gathered here, where a long run's lines have scrolled away
        print(f"{len(summary.failed)} failed:", file=sys.stderr)
        for record in summary.failed:
            print(f"  {record.error}", file=sys.stderr)
    print(f"outputs in {summary.settings.out_dir} ({summary.summary_path.name}, {summary.manifest_path.name})")
    if summary.cancelled:
        print("stopped early: run the same command again to resume")


def _note_kinds(note: str) -> dict[str, str]:
    """Each part of an image's note ('; '-separated) under its kind, the part with its figures taken out:
    'first of 3 pages' -> {'first of # pages': 'first of 3 pages'}."""
    return {_NUMBER.sub("#", part): part for part in note.split("; ") if part}


def _note_lines(records: list[ImageRecord], said: set[str]) -> list[str]:
    """The notes of `records` (finishing order), a line per kind: '998 images noted like a.jpg: rotated 90°
    clockwise as its EXIF orientation (6) says' where several images had one, 'b.tif: first of 3 pages' where
    one did and its kind is not in `said` (given its line during the run). Every note is in the manifest."""
    first: dict[str, str] = {}  # kind -> its first image's line
    counts: dict[str, int] = {}
    for record in records:
        for kind, part in _note_kinds(record.note).items():
            first.setdefault(kind, f"{record.source}: {part}")
            counts[kind] = counts.get(kind, 0) + 1
    return [f"{counts[kind]} images noted like {line}" if counts[kind] > 1 else line
            for kind, line in first.items() if counts[kind] > 1 or kind not in said]


def _summary_line(summary: BatchSummary) -> str:
    """'5 image(s): 3 segmented now, 1 finished before, 1 failed, 0 left; 2.10 img/s, process peak 700.1 MB', the
    rate and peak only of images segmented now, the peak named by what it measures (`peak_label`);
    'all 5 already done (resumed); nothing to run' when none was left."""
    ok = summary.ok
    if not summary.records and summary.total and summary.finished_before == summary.total:
        return f"all {summary.total} already done (resumed); nothing to run"
    counts = (f"{summary.total} image(s): {len(ok)} segmented now, {summary.finished_before} finished before, "
              f"{len(summary.failed)} failed, {summary.remaining} left")
    if not ok:
        return counts
    rate = len(ok) / summary.seconds if summary.seconds > 0 else 0.0  # images segmented, not failures
    top = max(ok, key=lambda r: r.peak_bytes)
    label = peak_label(top.peak_device or top.device)
    return f"{counts}; {rate:.2f} img/s, {label} {format_bytes(top.peak_bytes)}"
