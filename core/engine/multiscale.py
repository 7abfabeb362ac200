"""Multi-scale averaging, a test-time augmentation: each tile runs at several sizes (0.75x, 1x, 1.25x, ...) and
the class probabilities, each resized back to the tile, are averaged before the argmax.

A road scene's objects come at every distance; a net trained on scale-jittered crops sees each at the size it
knows best in one of the passes. The passes are bilinear resizes of the normalised tile (align_corners False,
as the training augmentation), each run as the model runs any size (its own padding to the stride). Tiles are
not exact across scales (a resized tile's border is not the resized image's), so a multi-scale job that needs
tiles takes fast ones with the halo widened for the smallest scale (see leanseg.core.segment_tiled).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from .head import labels_from_logits
from .tiling import TileRunner

SCALE_RANGE = (0.25, 4.0)  # the sizes a pass may take, as a factor of the image's
MAX_SCALES = 8
SUGGESTED_SCALES = (0.75, 1.0, 1.25)  # what the app's box and the docs offer: +0.009 mIoU on a held-out fold
EXACT_WITH_SCALES = ("--tiling exact is impossible with --scales: a resized tile's border is not the resized image's; "
                     "use fast or auto")


def check_scales(scales: tuple[float, ...]) -> tuple[float, ...]:
    """The scales sorted, or ValueError naming what is wrong with them."""
    if not scales:
        raise ValueError("scales must name at least one size, e.g. 1 or 0.75 1 1.25")
    if len(scales) > MAX_SCALES:
        raise ValueError(f"scales: at most {MAX_SCALES} sizes, got {len(scales)}")
    low, high = SCALE_RANGE
    for scale in scales:
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not low <= scale <= high:
            raise ValueError(f"scales must be numbers in {low:g}..{high:g}, got {scale!r}")
    if len(set(scales)) != len(scales):
        raise ValueError(f"scales must differ from each other, got {format_scales(scales)}")
    return tuple(sorted(float(scale) for scale in scales))


def format_scales(scales: tuple[float, ...]) -> str:
    """Scales as the CLI takes them and manifests and settings store them: "0.75 1 1.25"."""
    return " ".join(f"{scale:g}" for scale in scales)


def scaled_size(height: int, width: int, scale: float) -> tuple[int, int]:
    """The (height, width) a pass at `scale` runs at: at least one pixel each way."""
    return max(1, round(height * scale)), max(1, round(width * scale))


def multiscale_runner(runner: TileRunner, scales: tuple[float, ...], output: str = "labels") -> TileRunner:
    """Wrap a logits runner: (1, C, h, w) -> the mean over `scales` of its class probabilities at (h, w), as
    labels (1, h, w) or as logits (1, K, h, w) whose softmax is that mean (the log of it)."""
    if output not in ("labels", "logits"):
        raise ValueError(f"unknown output {output!r}; valid: labels, logits")
    scales = check_scales(scales)

    def run(x: Tensor) -> Tensor:
        height, width = x.shape[-2:]
        mean: Tensor | None = None
        for scale in scales:
            size = scaled_size(height, width, scale)
            scaled = x if size == (height, width) else F.interpolate(x, size=size, mode="bilinear",
                                                                     align_corners=False)
            logits = runner(scaled).float()
            del scaled
            with torch.inference_mode():  # the runners' outputs are inference tensors
                if logits.shape[-2:] != (height, width):
                    logits = F.interpolate(logits, size=(height, width), mode="bilinear", align_corners=False)
                probs = logits.softmax(1)
                del logits
                mean = probs if mean is None else mean.add_(probs)
                del probs
        assert mean is not None
        with torch.inference_mode():
            mean.div_(len(scales))
            return labels_from_logits(mean) if output == "labels" else mean.clamp_(min=1e-12).log_()

    return run


def multiscale_extra_bytes(num_classes: int, channels: int, height: int, width: int, largest: float) -> int:
    """What a multi-scale tile holds beyond its largest pass's own run: the running mean and one pass's
    probabilities at the tile's size, that pass's logits resized back, and the resized input."""
    scaled_pixels = math.prod(scaled_size(height, width, largest))
    return 3 * num_classes * height * width * 4 + channels * scaled_pixels * 4
