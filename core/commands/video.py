"""`leanseg video IN --out OUT.mp4`: segment a video frame by frame into an overlay video.

Also writes OUT.csv (per-frame class fractions) unless --no-csv, and per-frame label PNGs with
--labels-dir; with --no-overlay no video is written, only those. The output is the input's size
(.avi keeps odd sizes; other types add one column/row to reach an even size and say so). It is
finalised on Ctrl-C too: it then holds the frames done so far. An output that is the input, that
another output of the run also names, or that exists and no `leanseg video` wrote is refused
(--overwrite replaces the last kind) before the model loads.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..events import JobEvent
from ..io.output_names import output_stem
from ..io.outputs import OutputPathError, check_output_folder
from ..io.video import VideoReadError
from ..io.video_probe import check_video_file
from ..io.video_writer import WRITER_CODECS, VideoWriteError
from ..jobs import VideoJobOptions, segment_video
from ..jobs.video_guard import VideoOutputGuard
from ..memory import format_bytes
from ..memory.log import sidecar_path
from ..predict import Segmenter
from . import SUMMARIES
from .common import (
    CommandError,
    CtrlC,
    add_inference_options,
    add_memory_log_option,
    build_segmenter,
    describe_segmenter,
    memory_logging,
    positive_int,
    report_error,
    require_csv_name,
)
from .options import HELP_FORMATTER, add_overlay_options
from .progress import JobProgress


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("video", help=SUMMARIES["video"], description=__doc__,
                            formatter_class=HELP_FORMATTER)
    parser.add_argument("input", type=Path, metavar="IN", help="video file (MP4, MOV, AVI, MKV, ...)")
    parser.add_argument("--out", type=Path, required=True, metavar="OUT",
                        help=f"output video ({', '.join(WRITER_CODECS)}); also names OUT.csv")
    parser.add_argument("--labels-dir", type=Path, default=None, metavar="DIR",
                        help="also write one labels PNG per segmented frame here")
    parser.add_argument("--every", type=positive_int, default=1, metavar="N",
                        help="segment every Nth frame; the output then plays at fps/N")
    parser.add_argument("--csv", type=Path, default=None, metavar="PATH",
                        help="per-frame class fractions (default: OUT with .csv)")
    parser.add_argument("--no-csv", action="store_true", help="do not write the class-fraction CSV")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace existing outputs that no `leanseg video` wrote (default: refuse them; "
                             "the input is never overwritten)")
    add_overlay_options(parser, what="the overlay video OUT (--no-overlay: only OUT.csv and --labels-dir PNGs)")
    add_inference_options(parser)
    add_memory_log_option(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        options = VideoJobOptions(
            every=args.every,
            labels_dir=args.labels_dir,
            csv_path=None if args.no_csv else (args.csv or args.out.with_suffix(".csv")),
            alpha=args.alpha,
            write_video=args.overlay,
        )
        check_video_file(args.input)  # missing, unreadable or not a video: said before the model loads
        guard = _output_guard(args, options)
        guard.check()  # before the model loads and before anything is written
        require_csv_name(args.memory_log)
        folders = _output_folders(args, options)
        for folder, option in folders.items():
            check_output_folder(folder, option)
        segmenter = build_segmenter(args)
    except (CommandError, ValueError, VideoReadError, OutputPathError) as err:  # VideoOutputRefused: a ValueError
        return report_error(err)
    try:
        return _run(args, options, segmenter, guard, list(folders))
    finally:
        guard.close()


def _outputs(args: argparse.Namespace, options: VideoJobOptions) -> list[tuple[Path, str, str]]:
    """Every file this run writes: its path, what it is with the option that names it, and how an error about its
    folder begins ("--out v/out.mp4:")."""
    out = f"--out {args.out}:"
    files: list[tuple[Path, str, str]] = []
    if options.write_video:
        files.append((args.out, "the output video (--out)", out))
    if options.csv_path is not None:  # default: OUT with .csv, so --out chose it
        files.append((options.csv_path, "the class-fraction CSV (--csv, default OUT with .csv)",
                      f"--csv {args.csv}:" if args.csv else out))
    if args.memory_log is not None:  # its JSON sidecar goes beside it
        log = f"--memory-log {args.memory_log}:"
        files.append((args.memory_log, "the memory log (--memory-log)", log))
        files.append((sidecar_path(args.memory_log), "the memory log's JSON sidecar (--memory-log)", log))
    return files


def _output_guard(args: argparse.Namespace, options: VideoJobOptions) -> VideoOutputGuard:
    """The guard over every file this run writes (`_outputs`) and the label PNGs."""
    files = [(path, what) for path, what, _ in _outputs(args, options)]
    logs = (args.memory_log, sidecar_path(args.memory_log)) if args.memory_log is not None else ()
    return VideoOutputGuard(args.input, files, options.labels_dir, output_stem(args.input), args.overwrite,
                            memory_log_files=logs)


def _output_folders(args: argparse.Namespace, options: VideoJobOptions) -> dict[Path, str]:
    """The folders the run writes in, as the user named them (each output's, and --labels-dir), each with the
    option that chose it as an error about it begins ("--out v/out.mp4:", "--labels-dir")."""
    folders: dict[Path, str] = {}
    for path, _, option in _outputs(args, options):
        folders.setdefault(path.parent, option)
    if options.labels_dir is not None:
        folders.setdefault(options.labels_dir, "--labels-dir")
    return folders


def _cannot_write(err: OSError, folders: list[Path], out: Path) -> str:
    """A write that failed mid-run, naming what the user gave: a hidden file of ours (the ledger, a partial
    output) by its folder among `folders` (`_output_folders`)."""
    if not err.filename:
        return f"{out}: cannot write it ({err.strerror or err})"
    failed = Path(os.fsdecode(err.filename))
    if not failed.name.startswith("."):
        return f"{failed}: cannot write it ({err.strerror or err})"
    folder = next((given for given in folders if given.resolve() == failed.parent.resolve()), failed.parent)
    return f"{folder}: cannot write the output folder ({err.strerror or err})"


def _run(args: argparse.Namespace, options: VideoJobOptions, segmenter: Segmenter, guard: VideoOutputGuard,
         folders: list[Path]) -> int:
    print(describe_segmenter(segmenter))
    for path, earlier in guard.replaced_from_elsewhere():
        print(f"  replaces {path}, made earlier from {earlier}")
    progress = JobProgress(args.input.name, unit="frames")

    def show(event: JobEvent) -> None:
        if event.kind == "start":
            progress.start(event)
        elif event.kind == "frame":
            progress.advance(postfix=f"{1000 * event.data['seconds']:.0f} ms/frame inference")
        elif event.kind == "warning":
            progress.note(f"warning: {event.message}", sys.stderr)
        elif event.kind in ("plan", "info"):
            progress.note(f"  {event.message}")

    with CtrlC(["stopping after the current frame (Ctrl-C again to stop at once)"]) as ctrl_c:
        try:
            if args.memory_log is not None:
                guard.claim(args.memory_log)
                guard.claim(sidecar_path(args.memory_log))
            with memory_logging(args.memory_log, segmenter.device, show) as on_event:
                summary = segment_video(args.input, args.out, segmenter, options, cancel=ctrl_c.pressed[0],
                                        on_event=on_event, guard=guard)
        except (VideoReadError, VideoWriteError, CommandError) as err:
            return report_error(err)
        except OutputPathError as err:  # names the output already
            return report_error(CommandError(str(err)))
        except OSError as err:  # e.g. a folder that cannot be written
            return report_error(CommandError(_cannot_write(err, folders, args.out)))
        except KeyboardInterrupt:
            progress.close()
            print(f"interrupted; {args.out} holds the frames segmented so far", file=sys.stderr)
            return 130
        finally:
            ctrl_c.over()
            progress.close()
        outputs = [str(summary.output)] if summary.output else []
        if summary.csv_path is not None and summary.frames_done:
            outputs.append(str(summary.csv_path))
        if summary.label_files:
            outputs.append(f"{summary.label_files} label PNGs in {args.labels_dir}")
        first = (f" (the first {1000 * summary.frame_seconds[0]:.0f} ms: warm-up)"
                 if len(summary.frame_seconds) > 1 else "")
        print(f"{summary.frames_done} frame(s) in {summary.seconds:.1f} s, {summary.fps:.2f} frames/s end to end, "
              f"inference {1000 * summary.median_infer_seconds:.0f} ms/frame median{first}, "
              f"peak {format_bytes(summary.peak_bytes)}; wrote {', '.join(outputs) or 'nothing'}")
    if summary.cancelled:
        expected = f" of {summary.frames_expected}" if summary.frames_expected else ""
        print(f"stopped by Ctrl-C after {summary.frames_done}{expected} frame(s); the outputs hold them and play",
              file=sys.stderr)
        return 130
    return 0 if summary.complete else 1
