"""Mirror averaging, a test-time augmentation: each tile runs as it is and mirrored left to right, and the
two logits are averaged (the mirrored one mirrored back) before the argmax.

The image runs on a canvas zero-padded on the right up to the tiling stride, which is what the models' own
padding does, so the direct pass is unchanged. On that canvas a tile's mirror image starts on the stride grid
of the mirrored canvas too, so each pass of an exact tile equals that pass over the whole image, and exact
tiles stay exact with mirror averaging on.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from .head import labels_from_logits
from .tile_plan import Box
from .tiling import TileRunner, TileSink, TileSource

MIRROR_MODES = ("off", "flip")
ROWS_PER_BAND = 64  # rows of the mirrored logits copied at a time when adding them


def mirror_runner(runner: TileRunner, output: str = "labels") -> TileRunner:
    """Wrap a logits runner: (1, C, h, w) -> the mean of its logits and its mirrored input's mirrored logits,
    as labels (1, h, w) or logits (1, K, h, w)."""
    if output not in ("labels", "logits"):
        raise ValueError(f"unknown output {output!r}; valid: labels, logits")

    def run(x: Tensor) -> Tensor:
        logits = runner(x).float()
        mirrored = runner(x.flip(-1)).float()
        with torch.inference_mode():  # the runners' outputs are inference tensors
            for top in range(0, logits.shape[2], ROWS_PER_BAND):  # a band's mirrored copy at a time
                rows = slice(top, top + ROWS_PER_BAND)
                logits[:, :, rows].add_(mirrored[:, :, rows].flip(-1)).mul_(0.5)
            del mirrored
            return labels_from_logits(logits) if output == "labels" else logits

    return run


def mirror_extra_bytes(num_classes: int, channels: int, height: int, width: int) -> int:
    """What a mirrored tile holds beyond one logits run: the first pass's logits while the second runs, and the
    mirrored input (the second pass's logits are added back a band of rows at a time)."""
    return (num_classes + channels) * height * width * 4


def canvas_width(width: int, stride: int) -> int:
    """The image's width padded up to a multiple of the tiling stride."""
    return -(-width // stride) * stride


def padded_source(source: TileSource, width: int) -> TileSource:
    """Read boxes of the canvas: the image's columns from `source`, zeros right of `width`."""

    def read(box: Box) -> Tensor:
        top, bottom, left, right = box
        if left >= width:
            raise ValueError(f"tile columns {left}-{right} lie wholly in the canvas padding (image width {width})")
        tile = source((top, bottom, left, min(right, width)))
        return F.pad(tile, (0, right - min(right, width))) if right > width else tile

    return read


def cropped_sink(sink: TileSink, width: int) -> TileSink:
    """Write only the image's columns of each core: the canvas padding is dropped."""

    def write(core: Box, output: Tensor) -> None:
        top, bottom, left, right = core
        if left >= width:
            return
        kept = min(right, width) - left
        sink((top, bottom, left, left + kept), output[..., :kept])

    return write
