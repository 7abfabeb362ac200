"""The `segment` job: a list of image files -> labels (and overlay) PNGs in a folder."""
from __future__ import annotations

import io
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..engine.oom import OutOfMemory
from ..engine.tiling import TilingOutcome
from ..events import EventSink, JobCancelled, JobEvent, ignore_event, said_once
from ..io.images import ALPHA_IGNORED, ImageReadError, has_transparency, read_image, to_rgb8
from ..io.output_names import output_file_name, output_stems
from ..io.outputs import atomic_write_bytes, overlay, write_png
from ..memory import format_bytes, peak_label
from ..predict import InferenceOptions, Segmenter
from .folder_lock import FolderLock
from .segment_large import is_large_tiff, segment_large_tiff
from .segment_ledger import SegmentLedger


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
    peak_device: str = ""  # where peak_bytes was measured: the segmenter's device, even after a CPU fallback
    tiling: TilingOutcome | None = None  # what the tiler did: its tiles and their peak (None for a failed file)


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
    """One output stem per input, by the rule of `io.output_names` over the paths below their common
    folder, flattened into one output folder: `d1/a.png`, `d2/a.png` -> `a_png_<hash>` twice, distinct."""
    if not paths:
        return []
    absolute = [Path(os.path.abspath(p)) for p in paths]
    common = Path(os.path.commonpath([str(p.parent) for p in absolute]))
    keys = [p.relative_to(common).as_posix() for p in absolute]
    stems = output_stems(keys, mirror_folders=False)
    return [stems[key] for key in keys]


class OutputRefused(ValueError):
    """An output path is an input, or holds a file no `leanseg segment` wrote (without --overwrite)."""


def segment_files(
    paths: list[Path],
    out_dir: Path,
    segmenter: Segmenter,
    *,
    write_overlay: bool = True,
    overlay_alpha: float = 0.5,
    write_probs: bool = False,
    overwrite: bool = False,
    cancel: threading.Event | None = None,
    on_event: EventSink = ignore_event,
) -> JobSummary:
    """Segment each file; a bad file is reported and skipped.

    Outputs are named by `io.output_names`. No output is ever written over an input; an existing file
    is replaced only if a `leanseg segment` run wrote it (the folder's ledger) or `overwrite`. Holds
    the output folder's lock (FolderBusyError if another run writes there)."""
    wanted = _Wanted(write_overlay, overlay_alpha, write_probs)
    if write_probs and not segmenter.options.want_probs:
        raise ValueError("write_probs needs a Segmenter made with InferenceOptions(want_probs=True)")
    with FolderLock(out_dir, on_note=lambda note: on_event(JobEvent("warning", note))):
        ledger = SegmentLedger(out_dir)
        try:
            return _segment_all(paths, out_dir, segmenter, wanted, _OutputGuard(paths, ledger, overwrite),
                                cancel, on_event)
        finally:
            ledger.close()


class _OutputGuard:
    """Refuses outputs that are inputs, or existing files that are not ours; notes the rest as ours."""

    def __init__(self, inputs: list[Path], ledger: SegmentLedger, overwrite: bool) -> None:
        self.inputs = {p.resolve() for p in inputs}
        self.ledger = ledger
        self.overwrite = overwrite

    def check(self, source: Path, targets: list[Path]) -> None:
        for target in targets:
            if target.resolve() in self.inputs:
                raise OutputRefused(f"{source}: its output {target} is one of the inputs and is never overwritten; "
                                    "choose another --out")
            if target.exists() and not self.overwrite and not self.ledger.owns(target.name):
                raise OutputRefused(f"{source}: {target} already exists and was not written by leanseg segment; "
                                    "pass --overwrite to replace it")

    def replaced_from_elsewhere(self, source: Path, targets: list[Path]) -> list[tuple[Path, str]]:
        """The existing targets an earlier run here wrote from another file, with that file."""
        found = []
        for target in targets:
            earlier = self.ledger.source_of(target.name)
            if earlier and earlier != str(source.resolve()) and target.exists():
                found.append((target, earlier))
        return found

    def claim(self, source: Path, targets: list[Path]) -> None:
        for target in targets:
            self.ledger.add(target.name, source.resolve())


@dataclass(frozen=True)
class _Wanted:
    """The outputs besides NAME_labels.png."""

    overlay: bool  # NAME_overlay.png
    alpha: float  # overlay opacity of the class colours
    probs: bool  # NAME_probs.npy, (K, H, W) float16


def _segment_all(paths: list[Path], out_dir: Path, segmenter: Segmenter, wanted: _Wanted, guard: _OutputGuard,
                 cancel: threading.Event | None, on_event: EventSink) -> JobSummary:
    summary = JobSummary()
    count = len(paths)
    on_event(JobEvent("start", f"segmenting {count} image(s) on {segmenter.device}", count=count))
    on_event = said_once(on_event, "alpha_ignored")
    for index, (path, stem) in enumerate(zip(paths, output_names(paths))):
        if cancel is not None and cancel.is_set():
            summary.cancelled = True
            on_event(JobEvent("cancelled", "cancelled", index=index, count=count))
            break
        try:
            result = _segment_image(path, out_dir, stem, segmenter, wanted, guard, cancel, on_event)
            if result.tiling is not None and (line := _tiles_line(path.name, result.tiling)):
                on_event(JobEvent("info", line, path=str(path), data={"tiles": result.tiling.tiles_run}))
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
                    f"{_budget_text(result.tiling, segmenter.options)}{_peak_text(result)}"
                    + (f", -> {result.outputs[0].name}" if stem != path.stem else ""),
                    index=index,
                    count=count,
                    path=str(path),
                    data={"seconds": result.seconds, "peak_bytes": result.peak_bytes},
                )
            )
        summary.results.append(result)
    on_event(JobEvent("done", f"{len(summary.results) - len(summary.failed)} ok, {len(summary.failed)} failed"))
    return summary


def _segment_image(
    path: Path,
    out_dir: Path,
    stem: str,
    segmenter: Segmenter,
    wanted: _Wanted,
    guard: _OutputGuard,
    cancel: threading.Event | None,
    on_event: EventSink,
) -> FileResult:
    if is_large_tiff(path):  # an uncompressed TIFF this big is segmented from a memory map, tile by tile
        labels_tif = out_dir / f"{stem}_labels.tif"
        guard.check(path, [labels_tif])
        if wanted.overlay or wanted.probs:
            on_event(JobEvent("info", f"{path.name}: segmented tile by tile from disk, so only its labels TIFF "
                              "is written (no overlay or probabilities)", path=str(path)))
        guard.claim(path, [labels_tif])
        large = segment_large_tiff(path, labels_tif, segmenter, cancel=cancel, on_event=on_event)
        return FileResult(path, ok=True, outputs=[large.labels_path], seconds=large.seconds,
                          peak_bytes=large.peak_bytes, start_bytes=large.start_bytes, width=large.width,
                          height=large.height, device=large.tiling.device, peak_device=str(segmenter.device),
                          tiling=large.tiling)
    labels_path = out_dir / output_file_name(stem, "labels")
    overlay_path = out_dir / output_file_name(stem, "overlay")
    probs_path = out_dir / output_file_name(stem, "probs")
    targets = [labels_path] + ([overlay_path] if wanted.overlay else []) + ([probs_path] if wanted.probs else [])
    guard.check(path, targets)  # before reading or inference
    replaced = guard.replaced_from_elsewhere(path, targets)
    for earlier in dict.fromkeys(source for _, source in replaced):
        names = ", ".join(target.name for target, source in replaced if source == earlier)
        on_event(JobEvent("info", f"{path.name}: replaces {names}, made earlier from {earlier}", path=str(path)))
    image = read_image(path)
    if image.note:  # e.g. rotated as its EXIF orientation says
        on_event(JobEvent("info", f"{path.name}: {image.note}", path=str(path)))
    if has_transparency(image):
        on_event(JobEvent("info", f"{path.name}: {ALPHA_IGNORED}", path=str(path), data={"alpha_ignored": True}))
    result = segmenter.segment(image, cancel=cancel, on_event=on_event)
    guard.claim(path, targets)
    outputs = [write_png(labels_path, result.labels)]
    if wanted.overlay:
        blended = overlay(to_rgb8(image), result.labels, segmenter.info.class_colours, alpha=wanted.alpha)
        outputs.append(write_png(overlay_path, blended))
    if wanted.probs and result.probs is not None:
        buffer = io.BytesIO()
        np.save(buffer, result.probs.astype(np.float16))  # (K, H, W)
        outputs.append(atomic_write_bytes(probs_path, buffer.getvalue()))
    return FileResult(path, ok=True, outputs=outputs, seconds=result.seconds, peak_bytes=result.peak_bytes,
                      start_bytes=result.start_bytes, width=image.width, height=image.height, device=result.device,
                      peak_device=result.peak_device, tiling=result.tiling)


def _tiles_line(name: str, tiling: TilingOutcome) -> str:
    """'huge.png: 6 tiles of 1504x1344 px, each at most 92.5 MB of engine tensors'; '' for one pass."""
    if tiling.tiles_run < 2:
        return ""
    rows, columns = tiling.tile_shape  # the last tile's core
    known = tiling.tile_peak_bytes and tiling.measure != "mixed"
    peak = f", each at most {format_bytes(tiling.tile_peak_bytes)} of {tiling.measure}" if known else ""
    return f"{name}: {tiling.tiles_run} tiles of {columns}x{rows} px{peak}"


def _budget_text(tiling: TilingOutcome | None, options: InferenceOptions) -> str:
    """'tensor peak 140.5 MB (tiles and image arrays) of the 256.0 MB budget; ' under a --memory-budget, when the
    tiles counted engine tensors, else ''."""
    budget = options.memory_budget
    if not budget or tiling is None or not tiling.tile_peak_bytes or tiling.measure != "engine tensors":
        return ""
    held = tiling.plan.held_bytes  # the image and its output arrays, which the plan counts against the budget
    what = " (tiles and image arrays)" if held else ""
    return f"tensor peak {format_bytes(tiling.tile_peak_bytes + held)}{what} of the {format_bytes(budget)} budget; "


def _peak_text(result: FileResult) -> str:
    """'process peak 789.7 MB (293.0 MB above the start)': the process's peak (CUDA allocated on a GPU), and how
    far it rose from where the image began."""
    label = peak_label(result.peak_device or result.device)
    if not result.start_bytes:
        return f"{label} {format_bytes(result.peak_bytes)}"
    rise = format_bytes(result.peak_bytes - result.start_bytes)
    return f"{label} {format_bytes(result.peak_bytes)} ({rise} above the start)"

