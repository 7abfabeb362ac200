"""A picture larger than comfortable: an N x N uncompressed TIFF segmented from a memory map.

The TIFF (a CamVid sample scaled to 4096 and mirrored across the square, written band by band)
is made before the probe starts; the peak then covers the segmentation: tiles read from the
map, labels written to a mapped TIFF. `max_tiles` stops early (cancel) on a busy machine: the
peak is reached on the first tile row, the time per megapixel is over the tiles done.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import tifffile

from ..events import JobCancelled, JobEvent
from ..predict import InferenceOptions, Segmenter
from .measure import Probe

BLOCK_PX = 4096  # the scaled sample is repeated (mirrored) in blocks of this side


def make_large_tiff(path: Path, size: int, image: str) -> Path:
    """Write (size, size, 3) uint8 as an uncompressed TIFF without holding it in memory."""
    from .bench_inputs import scaled_image

    block = scaled_image(image, BLOCK_PX)
    tiles = [[block, block[:, ::-1]], [block[::-1], block[::-1, ::-1]]]  # mirrored: no seams
    out = tifffile.memmap(path, shape=(size, size, 3), dtype=np.uint8, photometric="rgb",
                          bigtiff=size * size * 3 > 2**32 - 2**25)
    for top in range(0, size, BLOCK_PX):
        rows = min(BLOCK_PX, size - top)
        row_of_blocks = tiles[(top // BLOCK_PX) % 2]
        band = np.concatenate([row_of_blocks[(x // BLOCK_PX) % 2][:rows] for x in range(0, size, BLOCK_PX)], axis=1)
        band = band[:, :size]
        out[top:top + rows] = band
        out.flush()
    del out
    return path


def large_tiff_case(probe: Probe, path: str, budget: int, tiling: str, max_tiles: int, model: str | None,
                    device: str = "cpu") -> dict[str, Any]:
    """Peak and seconds per megapixel of segment_large_tiff; stops after max_tiles tiles (0: all)."""
    from ..jobs.segment_large import segment_large_tiff
    from .bench_inputs import load_bench_model

    segmenter = Segmenter(load_bench_model(model), InferenceOptions(device=device, tiling=tiling,
                                                                    memory_budget=budget))
    cancel = threading.Event()
    done: list[JobEvent] = []
    plan: list[JobEvent] = []

    def on_event(event: JobEvent) -> None:
        if event.kind == "plan":
            plan.append(event)
        if event.kind == "tile":
            done.append(event)
            if max_tiles and len(done) >= max_tiles:
                cancel.set()

    out = Path(path).with_name(Path(path).stem + "_labels.tif")
    probe.start()
    start = time.perf_counter()
    try:
        segment_large_tiff(path, out, segmenter, cancel=cancel, on_event=on_event)
        finished = True
    except JobCancelled:
        finished = False
    seconds = time.perf_counter() - start
    peak = probe.peak_bytes()
    pixels = sum((e.data["core"][1] - e.data["core"][0]) * (e.data["core"][3] - e.data["core"][2]) for e in done)
    out.unlink(missing_ok=True)
    return {"peak_bytes": peak, "seconds": seconds, "finished": finished, "tiles_done": len(done),
            "tiles": plan[0].count if plan else 0, "plan": plan[0].message if plan else "",
            "s/MP": seconds / max(pixels / 1e6, 1e-9), "megapixels_done": pixels / 1e6}
