"""Segment a picture larger than memory: a memory-mapped TIFF in, a memory-mapped label TIFF out.

Tiles are read from the input map, run, and their labels written straight to the output map,
so neither picture is ever whole in memory. The output appears under its name only when
complete (written as a hidden partial file, renamed at the end, removed on cancel or error).
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tifffile
import torch

from ..engine.tile_plan import Box
from ..engine.tiling import TilingOutcome, run_tiles
from ..events import EventSink, JobEvent, ignore_event
from ..io.images import ImageData, declared_white, largest_colour, to_model_input
from ..io.large import MEMMAP_MIN_PIXELS, MappedTiff, create_label_tiff, mappable_tiff, open_large_tiff
from ..io.outputs import make_folder
from ..io.pixel_range import choose_white
from ..memory import peak_bytes, reset_peak
from ..predict import Segmenter
from ..segment_tiled import canvas_io, cpu_runner_for, job_width, plan_event, plan_tiles, runner_for


@dataclass
class LargeResult:
    labels_path: Path  # (H, W) uint8 uncompressed TIFF
    height: int
    width: int
    seconds: float
    peak_bytes: int  # process peak (CPU) or device peak (CUDA) while segmenting
    tiling: TilingOutcome  # what the tiler did: where the last tile ran, its tiles and their peak, notes
    start_bytes: int = 0  # what was in use as segmenting began, in the same measure as peak_bytes


def is_large_tiff(path: str | Path, min_pixels: int | None = None) -> bool:
    """True for a memory-mappable TIFF of at least min_pixels (default MEMMAP_MIN_PIXELS): mapped tile by tile."""
    mapped = mappable_tiff(path)
    threshold = MEMMAP_MIN_PIXELS if min_pixels is None else min_pixels
    return mapped is not None and mapped.height * mapped.width >= threshold


def segment_large_tiff(
    in_path: str | Path,
    out_path: str | Path,
    segmenter: Segmenter,
    *,
    cancel: threading.Event | None = None,
    on_event: EventSink = ignore_event,
    max_pixels: int | None = None,
) -> LargeResult:
    """Labels of an uncompressed TIFF (H, W[, C]) into a new uint8 TIFF at out_path, tile by tile.

    `max_pixels`: refuse larger pictures (default: the process limit, `images.set_max_pixels`)."""
    in_path, out_path = Path(in_path), Path(out_path)
    source_tiff = open_large_tiff(in_path, max_pixels)
    if out_path.exists() and out_path.resolve() == in_path.resolve():
        raise ValueError(f"{in_path}: the output {out_path.name} would overwrite the input; choose another path")
    start_bytes = reset_peak(segmenter.device)
    start = time.perf_counter()
    white, said = _white(source_tiff, cancel)
    if said:
        on_event(JobEvent("info", f"{in_path.name}: {said}", path=str(in_path)))
    plan = plan_tiles(segmenter, source_tiff.height, job_width(segmenter, source_tiff.width), output="labels",
                      image_width=source_tiff.width)
    on_event(plan_event(plan))
    make_folder(out_path.parent)
    partial = out_path.with_name(f".{out_path.name}.partial")
    labels_tiff = create_label_tiff(partial, source_tiff.height, source_tiff.width)
    try:
        source, sink = canvas_io(segmenter, source_tiff.width, _mapped_source(source_tiff, segmenter, white),
                                 _mapped_sink(labels_tiff))
        outcome = run_tiles(plan, source, sink, runner_for(segmenter, "labels", cancel), device=segmenter.device,
                            cancel=cancel, on_event=on_event, cpu_runner=cpu_runner_for(segmenter))
        os.replace(partial, out_path)
    finally:
        partial.unlink(missing_ok=True)
    return LargeResult(out_path, source_tiff.height, source_tiff.width, time.perf_counter() - start,
                       peak_bytes(segmenter.device), outcome, start_bytes)


def _white(tiff: MappedTiff, cancel: threading.Event | None) -> tuple[int, str]:
    """(white, what the note says) of a mapped TIFF, as `read_image` finds them (`pixel_range.choose_white`): the
    file's MaxSampleValue, else its largest colour value, read 64 MB of rows at a time (a cancel stops the scan;
    the tiles then stop at once); (0, "") for 8-bit samples, whose white is 255."""
    if tiff.dtype != np.uint16:
        return 0, ""
    with tifffile.TiffFile(tiff.path) as tif:
        page = tif.pages[0]
        assert isinstance(page, tifffile.TiffPage)
        declared = declared_white(page)
    largest = 0
    rows = max(1, (64 << 20) // max(1, int(np.prod(tiff.shape[1:])) * tiff.dtype.itemsize))
    for top in range(0, 0 if declared else tiff.height, rows):
        if cancel is not None and cancel.is_set():
            break
        largest = max(largest, largest_colour(tiff.read(top, min(top + rows, tiff.height), 0, tiff.width)))
    return choose_white(largest, declared)


def _mapped_source(tiff: MappedTiff, segmenter: Segmenter, white: int):  # type: ignore[no-untyped-def]
    info = segmenter.info

    def read(box: Box) -> torch.Tensor:
        pixels = ImageData(tiff.read(*box), white=white)
        return torch.from_numpy(to_model_input(pixels, info.config.in_channels, info.mean, info.std))[None]

    return read


def _mapped_sink(tiff: MappedTiff):  # type: ignore[no-untyped-def]
    def write(core: Box, output: torch.Tensor) -> None:
        labels = output if output.dim() == 2 else output.float().argmax(0)
        tiff.write(core[0], core[2], labels.to(torch.uint8).cpu().numpy().astype(np.uint8, copy=False))

    return write
