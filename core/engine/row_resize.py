"""Rows of a resized map computed from the source rows under them: what every banded step that reads an
upsampled tensor (virtual concatenations, FPN merges, the labels head, banded chains) builds per band."""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn


def source_rows(top: int, bottom: int, scale: int, mode: str, source_height: int) -> tuple[int, int]:
    """Source rows [first, last) whose upsampling (align_corners=False) reproduces output rows [top, bottom)."""
    if mode == "nearest":
        return top // scale, (bottom - 1) // scale + 1
    first = max(0, math.floor((top + 0.5) / scale - 0.5))
    last = min(source_height, math.floor((bottom - 0.5) / scale - 0.5) + 2)
    return first, last


def upsampled_rows(source: Tensor, top: int, bottom: int, scale: int, mode: str, align_corners: bool = False) -> Tensor:
    """Rows [top, bottom) of F.interpolate(source, scale_factor=scale, mode, align_corners), from the source
    rows under them."""
    height, width = source.shape[2], source.shape[3]
    if align_corners:
        resize = Resize(mode, True, (float(scale), float(scale)))
        return resize.rows(source, 0, range(top, bottom), height, height * scale, width * scale)
    first, last = source_rows(top, bottom, scale, mode, height)
    band = source[:, :, first:last]
    if mode == "bilinear":
        up = F.interpolate(band, scale_factor=float(scale), mode="bilinear", align_corners=False)
    else:
        up = F.interpolate(band, scale_factor=float(scale), mode="nearest")
    offset = top - first * scale
    return up[:, :, offset:offset + bottom - top]


class Resize(nn.Module):
    """F.interpolate as a chain stage: nearest or bilinear, to a size given at run time or by a scale."""

    def __init__(self, mode: str, align_corners: bool, scale: tuple[float, float] | None) -> None:
        super().__init__()
        self.mode, self.align_corners, self.scale = mode, align_corners, scale

    def output_size(self, height: int, width: int, size: tuple[int, int] | None) -> tuple[int, int]:
        if size is not None:
            return int(size[0]), int(size[1])
        assert self.scale is not None
        return math.floor(height * self.scale[0]), math.floor(width * self.scale[1])

    def source_coordinates(self, rows: range, in_h: int, out_h: int,
                           axis: int = 0) -> tuple[list[int], list[int], list[float]]:
        """For output rows (columns with axis=1): first source row, second source row, weight of the second
        (PyTorch's rules)."""
        if out_h == in_h:  # ATen copies a dimension whose size does not change, whatever the scale says
            return list(rows), list(rows), [0.0] * len(rows)
        scale = self.scale[axis] if self.scale is not None else None
        if self.align_corners:
            ratio = (in_h - 1) / (out_h - 1) if out_h > 1 else 0.0
        else:
            ratio = 1.0 / scale if scale is not None else in_h / out_h
        first, second, weight = [], [], []
        for y in rows:
            if self.mode == "nearest":
                index = _nearest_row(y, in_h, out_h, scale)
                first.append(index)
                second.append(index)
                weight.append(0.0)
                continue
            source = y * ratio if self.align_corners else max((y + 0.5) * ratio - 0.5, 0.0)
            y0 = min(math.floor(source), in_h - 1)
            first.append(y0)
            second.append(min(y0 + 1, in_h - 1))
            weight.append(source - y0)
        return first, second, weight

    def rows(self, band: Tensor, offset: int, out_rows: range, in_h: int, out_h: int, out_w: int) -> Tensor:
        """Output rows `out_rows` from `band` (source rows offset.. of the stage input), channels_last."""
        if band.is_meta:
            return band.new_empty((band.shape[0], band.shape[1], len(out_rows), out_w))
        kwargs: dict[str, Any] = {"mode": self.mode}
        if self.mode == "bilinear":
            kwargs["align_corners"] = self.align_corners
        scale = self.scale
        if scale is not None and not self.align_corners and scale[0] == int(scale[0]) and scale[1] == int(scale[1]):
            # An integer scale reproduces the whole map's rows from a band holding one extra source row at
            # each side (PyTorch clamps at the image edge as the band does): upsample the band, keep the rows.
            first = source_rows(out_rows.start, out_rows.stop, int(scale[0]), self.mode, in_h)[0]
            upsampled = F.interpolate(band[:, :, first - offset:], scale_factor=scale, **kwargs)
            start = out_rows.start - first * int(scale[0])
            return upsampled[:, :, start:start + len(out_rows)]
        first_rows, second_rows, weight = self.source_coordinates(out_rows, in_h, out_h)
        top = band[:, :, [i - offset for i in first_rows]]
        if self.mode == "bilinear":
            lam = torch.tensor(weight, dtype=band.dtype, device=band.device).view(1, 1, -1, 1)
            top = torch.lerp(top, band[:, :, [i - offset for i in second_rows]], lam)
        top = top.contiguous(memory_format=torch.channels_last)  # indexing drops the layout convs need
        if scale is not None and not self.align_corners:
            return F.interpolate(top, scale_factor=(1.0, scale[1]), **kwargs)
        return F.interpolate(top, size=(len(out_rows), out_w), **kwargs)

    def extra_repr(self) -> str:
        return f"mode={self.mode}, align_corners={self.align_corners}, scale={self.scale}"


def _nearest_row(y: int, in_h: int, out_h: int, scale: float | None) -> int:
    """The source row PyTorch's CPU nearest resize reads for output row y (ATen's nearest_idx: the same
    size and twice the size special-cased, else floor(y * ratio) in float32, which exact arithmetic
    does not reproduce: 45 -> 100 rows reads row 8 for row 20, not 9)."""
    if out_h == in_h:
        return y
    if out_h == 2 * in_h:
        return y >> 1
    ratio = np.float32(1.0 / scale) if scale is not None and scale > 0 else np.float32(in_h) / np.float32(out_h)
    return min(math.floor(np.float32(y) * ratio), in_h - 1)
