"""Labels of a resized band of logits, resizing only where the class can change.

Bilinear resizing makes each output pixel a weighted mean of the (up to) four source pixels around it.
Where those four share their top class, and it leads every other class by a clear margin at each of them,
the output pixel has that class too: v_c >= v_j at every corner holds for any weighted mean of the corners.
Nearest resizing copies one source pixel, class and all. So a labels-out tail that ends in a resize
(LR-ASPP, FPN, DeepLab, PSPNet, PAN: logits at 1/4 to 1/8 of the input, upsampled to it) takes the argmax at
the source resolution, and resizes and takes the argmax only for the column tiles that straddle a class
boundary, as the whole map would have computed them. That needs the source coordinates PyTorch computes in
float32, which this module reproduces exactly for nearest resizes and bilinear ones by a power of two
(2, 4, 8, ...); other bilinear resizes are done whole, band by band, as before.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from .row_resize import Resize, source_rows

TILE_COLUMNS = 32  # output columns decided together: a tile with any undecided pixel is resized and argmaxed
# A corner's top class must lead the runner-up by this fraction of the band's largest |logit|: float32
# rounding in the resize (a few units in the last place, 2^-24 relative) then cannot reorder the classes.
MARGIN = 2.0**-12


def resized_labels(resize: Resize, band: Tensor, offset: int, out_rows: range, in_h: int, out_h: int,
                   out_w: int, dtype: torch.dtype) -> tuple[Tensor, int]:
    """(1, K, r, w) source rows offset.. -> (1, len(out_rows), out_w) labels, equal to
    resize(band).argmax(1) for those rows (of the band in float32 for a power-of-two bilinear resize);
    and the bytes of the temporaries made for them (on meta tensors, the most a band can make: a bilinear
    band counted as if every tile straddled a class boundary)."""
    rows, (classes, height, width) = len(out_rows), band.shape[1:]
    scale = _power_of_two_scale(resize)
    if resize.mode == "bilinear" and scale is None:
        # At other scales ATen's float32 coordinates may read a row or column next to the one computed here:
        # resize the band's whole rows, as the chain did before, and take their argmax.
        logits = resize.rows(band, offset, out_rows, in_h, out_h, out_w)
        made = logits.untyped_storage().nbytes() + rows * out_w * 8
        labels = logits.new_empty((1, rows, out_w), dtype=dtype) if band.is_meta else logits.argmax(1).to(dtype)
        return labels, made
    # labels out, the source's argmax, three (R, w) index maps; bilinear: its two highest logits per pixel
    made = rows * out_w * dtype.itemsize + height * width * 8 + 3 * rows * width * 8
    if resize.mode == "bilinear":
        if band.dtype != torch.float32:
            # bf16 / fp16 logits are resized in float32, a copy at the source's size: a bf16 resize rounds
            # each output to 8 bits, so the margin would be 2^-5 of the largest logit, and ATen's reduced-
            # precision resize is the slower one. The labels are those of the float32 resize of the band.
            band = band.float()
            made += band.untyped_storage().nbytes()
        made += 2 * height * width * band.element_size()
    if band.is_meta:
        if scale is not None:  # every tile undecided: one run as wide as the band, resized from its crop
            first = source_rows(out_rows.start, out_rows.stop, scale, "bilinear", in_h)[0]
            made += classes * (height - (first - offset)) * scale * width * scale * band.element_size()
            made += rows * out_w * 8
        return band.new_empty((1, rows, out_w), dtype=dtype), made
    rows_a, rows_b, _ = resize.source_coordinates(out_rows, in_h, out_h)
    columns = _columns(resize, width, out_w)
    first_row = torch.tensor([r - offset for r in rows_a], device=band.device)
    second_row = torch.tensor([r - offset for r in rows_b], device=band.device)
    if classes == 1:
        return torch.zeros((1, rows, out_w), dtype=dtype, device=band.device), made
    label = band[0].argmax(0)  # (r, w): each source pixel's class (the first of tied ones, as argmax takes)
    label_a = label.index_select(0, first_row)  # (R, w): the class at each output row's first source row
    out = _take_columns(label_a.to(dtype), columns).unsqueeze(0)  # (1, R, W): right wherever decided
    if resize.mode == "nearest":
        return out, made
    top2 = band[0].topk(2, dim=0).values  # (2, r, w): each source pixel's two highest logits
    largest = max(float(band.amax()), -float(band.amin()))
    margin = MARGIN * largest
    clear = top2[0] - top2[1] > margin
    rows_agree = (label_a == label.index_select(0, second_row)) & clear.index_select(0, first_row) \
        & clear.index_select(0, second_row)  # (R, w): both source rows under an output row agree, clearly
    # A cell (source columns j, j + 1; j alone at the right edge) is decided where both its columns agree.
    right = torch.cat([label_a[:, 1:], label_a[:, -1:]], dim=1)
    right_agree = torch.cat([rows_agree[:, 1:], rows_agree[:, -1:]], dim=1)
    undecided = ~(rows_agree & right_agree & (label_a == right)).all(0)  # (w,): a cell column not decided
    runs = columns.undecided_runs(undecided.cpu().numpy())
    if runs:
        assert scale is not None
        made += _resolve(band, offset, out_rows, in_h, scale, runs, out)
    return out, made


def _resolve(band: Tensor, offset: int, out_rows: range, in_h: int, scale: int, runs: list[tuple[int, int]],
             out: Tensor) -> int:
    """Write the argmax of the bilinear x`scale` resize of `band` into out's columns [x0, x1) of each run;
    returns the most bytes of resized logits (and their argmax) held at once.

    With a power-of-two scale every source coordinate is exact in float32, so a crop with one spare source
    column each side (PyTorch clamps at its edges) gives the same values as the whole map."""
    first = source_rows(out_rows.start, out_rows.stop, scale, "bilinear", in_h)[0]
    start = out_rows.start - first * scale
    in_w = band.shape[3]
    held = 0
    for x0, x1 in runs:
        left = max(0, (x0 // scale) - 2)
        right = min(in_w, (x1 - 1) // scale + 3)
        crop = band[:, :, first - offset:, left:right]
        resized = F.interpolate(crop, scale_factor=float(scale), mode="bilinear", align_corners=False)
        logits = resized[:, :, start:start + len(out_rows), x0 - left * scale:x1 - left * scale]
        out[:, :, x0:x1] = logits.argmax(1)
        held = max(held, resized.untyped_storage().nbytes() + logits[:, 0].numel() * 8)
    return held


def _power_of_two_scale(resize: Resize) -> int | None:
    """The integer scale of a bilinear, align_corners=False resize when it is the same power of two on both
    axes (2, 4, 8, ...), else None."""
    if resize.mode != "bilinear" or resize.align_corners or resize.scale is None:
        return None
    height, width = resize.scale
    if height != width or height != int(height) or int(height) < 2 or int(height) & (int(height) - 1):
        return None
    return int(height)


@dataclass(frozen=True)
class _Columns:
    """Per output column its first source column (the second is the next one, or the same at the right
    edge), and the cell columns each tile of TILE_COLUMNS output columns reads."""

    first: np.ndarray  # (W,) int64
    tile_first: np.ndarray  # (tiles,) first cell column a tile reads
    tile_last: np.ndarray  # (tiles,) last cell column a tile reads

    def undecided_runs(self, undecided: np.ndarray) -> list[tuple[int, int]]:
        """Output column ranges [x0, x1), adjacent tiles merged, that read an undecided cell column."""
        counts = np.concatenate([[0], np.cumsum(undecided)])
        open_tiles = counts[self.tile_last + 1] > counts[self.tile_first]
        runs: list[tuple[int, int]] = []
        width = len(self.first)
        for tile in np.flatnonzero(open_tiles).tolist():
            x0, x1 = tile * TILE_COLUMNS, min(width, (tile + 1) * TILE_COLUMNS)
            if runs and runs[-1][1] == x0:
                runs[-1] = (runs[-1][0], x1)
            else:
                runs.append((x0, x1))
        return runs


def _take_columns(rows: Tensor, columns: _Columns) -> Tensor:
    """(R, w) -> (R, W): each output column's first source column (numpy's gather is 8x torch's here)."""
    if rows.device.type == "cpu":
        return torch.from_numpy(rows.numpy()[:, columns.first])
    return rows.index_select(1, torch.from_numpy(columns.first).to(rows.device))


def _columns(resize: Resize, in_w: int, out_w: int) -> _Columns:
    return _cached_columns(resize.mode, resize.align_corners, resize.scale, in_w, out_w)


@lru_cache(maxsize=64)
def _cached_columns(mode: str, align_corners: bool, scale: tuple[float, float] | None, in_w: int,
                    out_w: int) -> _Columns:
    """Every band of a run asks the same: computed once per (resize, widths)."""
    first, _, _ = Resize(mode, align_corners, scale).source_coordinates(range(out_w), in_w, out_w, axis=1)
    columns = np.asarray(first, dtype=np.int64)
    starts = np.arange(0, out_w, TILE_COLUMNS)
    ends = np.minimum(starts + TILE_COLUMNS, out_w) - 1
    return _Columns(columns, columns[starts], columns[ends])
