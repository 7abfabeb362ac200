"""The `segment` job: a list of image files -> labels (and overlay) PNGs in a folder."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from ..engine.oom import OutOfMemory
from ..events import EventSink, JobCancelled, JobEvent, ignore_event
from ..io.images import ImageReadError, read_image, to_rgb8
from ..io.outputs import overlay, write_png
from ..memory import format_bytes
from ..predict import Segmenter
from .segment_large import is_large_tiff, segment_large_tiff


@dataclass
class FileResult:
    path: Path
    ok: bool
    outputs: list[Path] = field(default_factory=list)
    seconds: float = 0.0
    peak_bytes: int = 0
    start_bytes: int = 0  # in use before the image, in the same measure as peak_bytes: the job's share is the rest
    error: str = ""
    width: int = 0
    height: int = 0
    device: str = ""


@dataclass
class JobSummary:
    results: list[FileResult] = field(default_factory=list)
    cancelled: bool = False

    @property
    def failed(self) -> list[FileResult]:
        return [r for r in self.results if not r.ok]

    @property
    def all_ok(self) -> bool:
        return not self.cancelled and not self.failed


def output_names(paths: list[Path]) -> list[str]:
    """One output stem per input; a stem seen twice gets its extension appended."""
    stems = [p.stem for p in paths]
    return [f"{p.stem}_{p.suffix.lstrip('.')}" if stems.count(p.stem) > 1 else p.stem for p in paths]


def segment_files(
    paths: list[Path],
    out_dir: Path,
    segmenter: Segmenter,
    *,
    write_overlay: bool = True,
    cancel: threading.Event | None = None,
    on_event: EventSink = ignore_event,
) -> JobSummary:
    """Segment each file; a bad file is reported and skipped. Inputs are never overwritten."""
    summary = JobSummary()
    count = len(paths)
    on_event(JobEvent("start", f"segmenting {count} image(s) on {segmenter.device}", count=count))
    for index, (path, stem) in enumerate(zip(paths, output_names(paths))):
        if cancel is not None and cancel.is_set():
            summary.cancelled = True
            on_event(JobEvent("cancelled", "cancelled", index=index, count=count))
            break
        try:
            result = _segment_one(path, out_dir, stem, segmenter, write_overlay, cancel, on_event)
        except JobCancelled:
            summary.cancelled = True
            on_event(JobEvent("cancelled", f"cancelled during {path}", index=index, count=count))
            break
        except (ImageReadError, ValueError, OSError, OutOfMemory) as err:
            result = FileResult(path, ok=False, error=str(err))
            on_event(JobEvent("error", str(err), index=index, count=count, path=str(path)))
        else:
            on_event(
                JobEvent(
                    "image",
                    f"{path.name}: {result.width}x{result.height}, {result.device}, {result.seconds:.2f} s, "
                    f"peak {_peak_text(result)}",
                    index=index,
                    count=count,
                    path=str(path),
                    data={"seconds": result.seconds, "peak_bytes": result.peak_bytes},
                )
            )
        summary.results.append(result)
    on_event(JobEvent("done", f"{len(summary.results) - len(summary.failed)} ok, {len(summary.failed)} failed"))
    return summary


def _segment_one(
    path: Path,
    out_dir: Path,
    stem: str,
    segmenter: Segmenter,
    write_overlay: bool,
    cancel: threading.Event | None,
    on_event: EventSink,
) -> FileResult:
    if is_large_tiff(path):  # an uncompressed TIFF this big is segmented from a memory map, tile by tile
        large = segment_large_tiff(path, out_dir / f"{stem}_labels.tif", segmenter, cancel=cancel, on_event=on_event)
        return FileResult(path, ok=True, outputs=[large.labels_path], seconds=large.seconds,
                          peak_bytes=large.peak_bytes, start_bytes=large.start_bytes, width=large.width,
                          height=large.height, device=large.device)
    image = read_image(path)
    labels_path = out_dir / f"{stem}_labels.png"
    overlay_path = out_dir / f"{stem}_overlay.png"
    for target in (labels_path, overlay_path):
        if target.exists() and target.resolve() == path.resolve():
            raise ValueError(f"{path}: the output {target.name} would overwrite the input; choose another --out")
    result = segmenter.segment(image, cancel=cancel, on_event=on_event)
    outputs = [write_png(labels_path, result.labels)]
    if write_overlay:
        blended = overlay(to_rgb8(image), result.labels, segmenter.info.class_colours, alpha=0.5)
        outputs.append(write_png(overlay_path, blended))
    return FileResult(path, ok=True, outputs=outputs, seconds=result.seconds, peak_bytes=result.peak_bytes,
                      start_bytes=result.start_bytes, width=image.width, height=image.height, device=result.device)


def _peak_text(result: FileResult) -> str:
    """'789.7 MB (293.0 MB above the start)': the process peak, and how far it rose from where the image began."""
    if not result.start_bytes:
        return format_bytes(result.peak_bytes)
    return f"{format_bytes(result.peak_bytes)} ({format_bytes(result.peak_bytes - result.start_bytes)} above the start)"
