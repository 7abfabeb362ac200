"""The `video` job: frames -> Segmenter -> labels -> overlay -> video writer, in flat memory.

Three threads overlap: the reader decodes ahead (bounded queue), this thread infers, and the
sink draws, encodes and writes behind (bounded queue). Cancel is checked between frames; the
output video and CSV are finalised whatever happens, so a cancelled export stays playable.
"""
from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..events import EventSink, JobCancelled, JobEvent, ignore_event
from ..io.images import ImageData
from ..io.output_names import output_stem
from ..io.video import VideoInfo, VideoReader
from ..io.video_writer import VideoWriteError, VideoWriter
from ..memory import format_bytes
from ..predict import Segmenter
from .video_guard import VideoOutputGuard
from .video_outputs import ClassFractionsCsv, SegmentedFrameSink

DEFAULT_FPS = 25.0  # output frame rate when the input's container does not say


@dataclass(frozen=True)
class VideoJobOptions:
    every: int = 1  # segment every Nth frame; the output holds those frames at fps / every
    labels_dir: Path | None = None  # also write <stem>_<frame:06d>_labels.png per segmented frame
    csv_path: Path | None = None  # per-frame class fractions (frame_index, time_s, "fraction NAME" per class)
    alpha: float = 0.5  # overlay opacity of the class colours
    write_video: bool = True  # the overlay video; False: only the CSV and label PNGs
    prefetch: int = 4  # frames decoded ahead of inference, and queued behind it for writing

    def __post_init__(self) -> None:
        if self.every < 1:
            raise ValueError(f"every must be >= 1 (1 = every frame), got {self.every}")
        if not 0.0 <= self.alpha <= 1.0:
            raise ValueError(f"alpha must be in 0..1, got {self.alpha}")
        if self.prefetch < 1:
            raise ValueError(f"prefetch must be >= 1, got {self.prefetch}")
        if not self.write_video and self.csv_path is None and self.labels_dir is None:
            raise ValueError("nothing to write: no overlay video, no CSV and no label PNGs; keep one of them")


@dataclass
class VideoJobSummary:
    input: Path
    info: VideoInfo
    output: Path | None = None  # None when no frame was written
    frames_done: int = 0  # frames segmented and written
    frames_expected: int | None = None  # what an intact file would give (every applied)
    seconds: float = 0.0  # wall time from the first frame to the last written
    infer_seconds: float = 0.0  # time inside Segmenter.segment, summed
    peak_bytes: int = 0  # highest per-frame peak the Segmenter reported
    cancelled: bool = False
    stop_note: str = ""  # where a truncated/damaged input stopped, if it did
    csv_path: Path | None = None
    label_files: int = 0
    frame_peaks: list[int] = field(default_factory=list)  # per-frame peak bytes, in order
    frame_seconds: list[float] = field(default_factory=list)  # per-frame inference time, in order

    @property
    def fps(self) -> float:
        """Frames segmented per second of wall time, end to end."""
        return self.frames_done / self.seconds if self.seconds > 0 else 0.0

    @property
    def median_infer_seconds(self) -> float:
        """The typical frame's inference time: the first frames pay the engine's warm-up, a mean would not show."""
        return float(statistics.median(self.frame_seconds)) if self.frame_seconds else 0.0

    @property
    def complete(self) -> bool:
        return not self.cancelled and not self.stop_note


def segment_video(
    input_path: Path,
    output_path: Path,
    segmenter: Segmenter,
    options: VideoJobOptions = VideoJobOptions(),
    *,
    cancel: threading.Event | None = None,
    on_event: EventSink = ignore_event,
    guard: VideoOutputGuard | None = None,
) -> VideoJobSummary:
    """Segment a video into an overlay video; raises VideoReadError/VideoWriteError for bad paths.

    Frames are (H, W, 3) uint8 RGB; labels (H, W) uint8. Events: start, info (the output is padded to
    an even size), frame (index k of count, data fps), warning (input stopped early), cancelled, done.
    With a `guard` (already checked by the caller), each output is noted in it before it is written.
    """
    input_path, output_path = Path(input_path), Path(output_path)
    if options.write_video and output_path.exists() and output_path.resolve() == input_path.resolve():
        raise VideoWriteError(output_path, "is the input video; choose another --out")
    with VideoReader(input_path, every=options.every, prefetch=options.prefetch) as reader:
        info = reader.info
        summary = VideoJobSummary(input_path, info, frames_expected=reader.frames_to_read,
                                  csv_path=options.csv_path)
        out_fps = (info.fps or DEFAULT_FPS) / options.every
        if guard is not None:
            if options.write_video:
                guard.claim(output_path)
            if options.csv_path is not None:
                guard.claim(options.csv_path)
        sink = _open_sink(output_path, out_fps, info, segmenter, options, output_stem(input_path),
                          guard.claim if guard is not None else None)
        on_event(JobEvent("start", f"{input_path.name}: {info.describe()}, on {segmenter.device}",
                          count=summary.frames_expected, path=str(input_path)))
        if sink.writer is not None and sink.writer.padding_note:
            on_event(JobEvent("info", sink.writer.padding_note, path=str(output_path)))
        start = time.perf_counter()
        try:
            _run_frames(reader, sink, segmenter, summary, start, cancel, on_event)
        finally:
            summary.output = sink.close()
            summary.label_files = sink.label_files
            summary.seconds = time.perf_counter() - start  # writing included
        summary.stop_note = reader.stop_note
    if summary.stop_note:
        on_event(JobEvent("warning", summary.stop_note, path=str(input_path)))
    if summary.cancelled:
        on_event(JobEvent("cancelled", f"cancelled after {summary.frames_done} frame(s); {output_path} holds them",
                          index=summary.frames_done, count=summary.frames_expected))
    on_event(JobEvent("done", f"{summary.frames_done} frame(s) in {summary.seconds:.1f} s ({summary.fps:.1f} "
                      f"frames/s), peak {format_bytes(summary.peak_bytes)}", count=summary.frames_done,
                      data={"fps": summary.fps, "peak_bytes": summary.peak_bytes}))
    return summary


def _open_sink(output_path: Path, fps: float, info: VideoInfo, segmenter: Segmenter, options: VideoJobOptions,
               stem: str, claim: Callable[[Path], None] | None) -> SegmentedFrameSink:
    writer = VideoWriter(output_path, fps, info.width, info.height) if options.write_video else None
    try:
        csv = None
        if options.csv_path is not None:
            csv = ClassFractionsCsv(options.csv_path, _class_names(segmenter))
        return SegmentedFrameSink(writer, segmenter.info.class_colours, alpha=options.alpha,
                                  labels_dir=options.labels_dir, labels_stem=stem, csv=csv,
                                  queue_size=options.prefetch, claim=claim)
    except BaseException:
        if writer is not None:
            writer.close()
        raise


def _class_names(segmenter: Segmenter) -> list[str]:
    names = list(segmenter.info.class_names)
    count = segmenter.info.config.num_classes
    return names if len(names) == count else [f"class_{k}" for k in range(count)]


def _engine_events(on_event: EventSink, summary: VideoJobSummary) -> EventSink:
    """Pass the Segmenter's warnings on, its plan/info only for the first frame, never its per-tile events."""

    def forward(event: JobEvent) -> None:
        if event.kind in ("warning", "error") or (event.kind in ("plan", "info") and summary.frames_done == 0):
            on_event(event)

    return forward


def _run_frames(reader: VideoReader, sink: SegmentedFrameSink, segmenter: Segmenter, summary: VideoJobSummary,
                start: float, cancel: threading.Event | None, on_event: EventSink) -> None:
    engine_events = _engine_events(on_event, summary)
    for frame in reader:
        if cancel is not None and cancel.is_set():
            summary.cancelled = True
            break
        try:
            result = segmenter.segment(ImageData(frame.rgb, summary.input), cancel=cancel, on_event=engine_events)
        except JobCancelled:
            summary.cancelled = True
            break
        sink.put(frame, result.labels)
        summary.frames_done += 1
        summary.infer_seconds += result.seconds
        summary.peak_bytes = max(summary.peak_bytes, result.peak_bytes)
        summary.frame_peaks.append(result.peak_bytes)
        summary.frame_seconds.append(result.seconds)
        summary.seconds = time.perf_counter() - start
        on_event(JobEvent("frame", f"frame {summary.frames_done}/{summary.frames_expected or '?'}",
                          index=summary.frames_done - 1, count=summary.frames_expected, path=str(summary.input),
                          data={"frame_index": frame.index, "fps": summary.fps, "seconds": result.seconds,
                                "peak_bytes": result.peak_bytes}))
