"""`leanseg segment IMAGE... --out DIR`: labels and overlay PNGs per image."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..events import JobEvent
from ..io.outputs import OutputPathError, check_output_folder
from ..io.video_probe import VIDEO_SUFFIXES
from ..jobs import JobSummary, ManifestError, segment_files
from ..memory import format_bytes, peak_label
from . import SUMMARIES
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
from .progress import TileProgress


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("segment", help=SUMMARIES["segment"], description=__doc__,
                            epilog=SEGMENT_EXIT_CODES, formatter_class=HELP_FORMATTER)
    parser.add_argument("images", nargs="+", type=Path, metavar="IMAGE",
                        help="image files (PNG, JPEG, TIFF 8/16-bit, BMP, ...); each gets NAME_labels.png")
    parser.add_argument("--out", type=Path, required=True, help="output folder (created if missing)")
    add_overlay_options(parser)
    add_probs_option(parser)
    parser.add_argument("--overwrite", action="store_true",
                        help="replace existing outputs that no `leanseg segment` wrote (default: refuse them; "
                             "inputs are never overwritten)")
    add_inference_options(parser, mirror="flip")
    add_memory_log_option(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    images = _distinct(args.images)
    try:
        _check_some_image_exists(images)
        check_output_folder(args.out, "--out")
        check_memory_log(args.memory_log)
        segmenter = build_segmenter(args, want_probs=args.probs)
    except (CommandError, OutputPathError) as err:
        return report_error(err)
    print(describe_segmenter(segmenter))
    tiles = TileProgress()
    stopped_in: list[str] = []  # where Ctrl-C stopped the image in flight: "after 3 of 12 tiles"

    def show(event: JobEvent) -> None:
        if event.kind == "tile":  # "tile i/n" of an image cut into tiles: a bar, and the job's summary after
            if (event.count or 0) > 1:
                tiles.advance(event)
            return
        if event.kind == "warning":  # e.g. a tile split after running out of memory: the bar goes on below
            tiles.note(f"  {event.message}")
            return
        if event.kind == "cancelled" and tiles.bar is not None:
            stopped_in.append(f" after {tiles.done} of {tiles.count} tiles")
        tiles.close()
        if event.kind == "image" and event.path is not None:
            print(f"{event.path}  {event.message.split(': ', 1)[1]}  [{event.index + 1}/{event.count}]"
                  if event.index is not None else event.message)
        elif event.kind in ("plan", "info"):
            print(f"  {event.message}", flush=True)
            if event.kind == "plan" and (event.count or 0) > 1:
                tiles.start(event.count or 0)
        elif event.kind == "error":
            print(f"failed{' (the rest go on)' if event.more_follow else ''}: {event.message}", file=sys.stderr)

    with CtrlC(["stopping after the current tile (Ctrl-C again to stop at once)"]) as ctrl_c:
        try:
            with memory_logging(args.memory_log, segmenter.device, show) as on_event:
                summary = segment_files(images, args.out, segmenter, write_overlay=args.overlay,
                                        overlay_alpha=args.alpha, write_probs=args.probs,
                                        overwrite=args.overwrite, cancel=ctrl_c.pressed[0], on_event=on_event)
        except (CommandError, ManifestError) as err:  # ManifestError: FolderBusyError, another run writes --out
            return report_error(err)
        except OutputPathError as err:  # names the output already
            return report_error(CommandError(str(err)))
        except OSError as err:
            return report_error(CommandError(f"{args.out}: cannot write the output folder ({err.strerror or err})"))
        finally:
            ctrl_c.over()
            tiles.close()
        print(_summary_line(summary, len(images), args.out))
    if summary.cancelled:
        print(f"stopped by Ctrl-C{''.join(stopped_in)}; the image in flight was not written", file=sys.stderr)
        return 130
    return 0 if summary.all_ok else 1


def _summary_line(summary: JobSummary, count: int, out: Path) -> str:
    """'2 of 3 image(s) segmented in 1.20 s, process peak 700.1 MB, outputs in OUT; 1 failed', or, with nothing
    segmented, '0 of 1 image(s) segmented (1 failed); nothing written': no time or peak of nothing."""
    ok = [r for r in summary.results if r.ok]
    failed = f"{len(summary.failed)} failed" if summary.failed else ""
    if not ok:
        return f"0 of {count} image(s) segmented" + (f" ({failed})" if failed else "") + "; nothing written"
    total = sum(r.seconds for r in ok)
    peak = max(ok, key=lambda r: r.peak_bytes)
    label = peak_label(peak.peak_device or peak.device)
    return (f"{len(ok)} of {count} image(s) segmented in {total:.2f} s, {label} {format_bytes(peak.peak_bytes)}, "
            f"outputs in {out}" + (f"; {failed}" if failed else ""))


def _distinct(images: list[Path]) -> list[Path]:
    """The images in the order given, each file once (the same file named twice is segmented once)."""
    seen: set[Path] = set()
    distinct = []
    for image in images:
        key = image.resolve()
        if key not in seen:
            seen.add(key)
            distinct.append(image)
    return distinct


def _check_some_image_exists(images: list[Path]) -> None:
    """CommandError before the model loads when no IMAGE is a file, or all are videos (one missing among others
    fails alone)."""
    # os.path.isfile, not Path.is_file: a file in a folder that cannot be entered is False here (it fails on its
    # own when read, naming the folder's permission), not a PermissionError that would stop the others
    if all(image.suffix.lower() in VIDEO_SUFFIXES and os.path.isfile(image) for image in images):
        raise CommandError(f"{images[0]}: is a video (segment a video with `leanseg video {images[0]} --out "
                           f"{images[0].stem}_overlay.mp4`)")
    if any(os.path.isfile(image) for image in images):
        return
    first = images[0]
    problem = "is a folder (segment a folder with `leanseg batch`)" if first.is_dir() else "no such file"
    others = f" (and none of the other {len(images) - 1} is a file)" if len(images) > 1 else ""
    raise CommandError(f"{first}: {problem}{others}")
