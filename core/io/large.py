"""Pictures larger than memory: uncompressed TIFFs read, and labels written, through memory maps.

Each access maps only the rows it needs and unmaps them when done, so the process's resident
memory holds one tile, not the file (pages of a map that stays open count as resident).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import tifffile

from .images import ImageReadError, check_pixels
from .images import max_pixels as process_pixel_limit

MEMMAP_MIN_PIXELS = 8192 * 8192  # from this size up, `leanseg segment` reads mappable TIFFs tile by tile
BIGTIFF_BYTES = 2**32 - 2**25  # classic TIFF offsets are 32-bit; leave room for the header


@dataclass(frozen=True)
class MappedTiff:
    """Where an uncompressed, contiguous TIFF keeps its pixels: rows of (W[, C]) samples from `offset`."""

    path: Path
    offset: int  # byte offset of the first pixel
    shape: tuple[int, ...]  # (H, W) or (H, W, C), C in 3, 4
    dtype: np.dtype  # uint8 or uint16, native byte order

    @property
    def height(self) -> int:
        return self.shape[0]

    @property
    def width(self) -> int:
        return self.shape[1]

    def read(self, top: int, bottom: int, left: int, right: int) -> np.ndarray:
        """A copy of pixels [top:bottom, left:right] -> (h, w[, C]); maps only those rows."""
        rows = self._rows(top, bottom, "r")
        region = np.array(rows[:, left:right])
        del rows  # unmaps: the pages leave this process's resident set
        return region

    def write(self, top: int, left: int, values: np.ndarray) -> None:
        """Store values (h, w[, C]) at [top, left]; flushed and unmapped before returning."""
        rows = self._rows(top, top + values.shape[0], "r+")
        rows[:, left:left + values.shape[1]] = values
        rows.flush()
        del rows

    def _rows(self, top: int, bottom: int, mode: Literal["r", "r+"]) -> np.memmap:
        row_bytes = int(np.prod(self.shape[1:])) * self.dtype.itemsize
        return np.memmap(self.path, dtype=self.dtype, mode=mode, offset=self.offset + top * row_bytes,
                         shape=(bottom - top, *self.shape[1:]))


def mappable_tiff(path: str | Path) -> MappedTiff | None:
    """The pixel layout of a TIFF that can be read through a memory map, else None (decode it instead).

    Mappable: the first page uncompressed, stored contiguously, interleaved samples, uint8/uint16.
    """
    path = Path(path)
    try:
        with path.open("rb") as handle:
            if handle.read(4) not in (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+"):
                return None
        with tifffile.TiffFile(path) as tif:
            page = tif.pages[0]
            if not isinstance(page, tifffile.TiffPage) or not page.is_memmappable or page.compression != 1:
                return None
            shape = tuple(int(n) for n in page.shape)
            dtype = np.dtype(page.dtype).newbyteorder(tif.byteorder)
            offset = int(page.dataoffsets[0])
    except (OSError, ValueError, tifffile.TiffFileError):
        return None
    planar_rgb = len(shape) == 3 and shape[0] in (3, 4) and shape[2] not in (3, 4)
    if planar_rgb or len(shape) not in (2, 3) or (len(shape) == 3 and shape[2] not in (3, 4)):
        return None
    if dtype not in (np.dtype(np.uint8), np.dtype(np.uint16)) or not dtype.isnative:
        return None
    return MappedTiff(path, offset, shape, dtype)


def open_large_tiff(path: str | Path, max_pixels: int | None = None) -> MappedTiff:
    """A mappable TIFF, refused (ImageReadError) above `max_pixels` (default: the process limit,
    `images.set_max_pixels`) or when it is not mappable."""
    mapped = mappable_tiff(path)
    if mapped is None:
        raise ImageReadError(path, "not an uncompressed, contiguous 8/16-bit TIFF; cannot read it through a "
                                   "memory map (save it uncompressed, or use a smaller image)")
    check_pixels(path, mapped.height, mapped.width, process_pixel_limit() if max_pixels is None else max_pixels)
    return mapped


def create_label_tiff(path: str | Path, height: int, width: int) -> MappedTiff:
    """A new uncompressed (H, W) uint8 TIFF filled with zeros, written through a map tile by tile."""
    path = Path(path)
    created = tifffile.memmap(path, shape=(height, width), dtype=np.uint8, photometric="minisblack",
                              bigtiff=height * width > BIGTIFF_BYTES)
    offset = int(created.offset)
    del created  # header written; the pixel rows are mapped again one tile at a time
    return MappedTiff(path, offset, (height, width), np.dtype(np.uint8))
