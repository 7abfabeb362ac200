"""What a PNG, JPEG, BMP or WebP file declares before any pixel is decoded: its size, where its data ends,
and (JPEG) its EXIF orientation.

Walking the container's own structure (PNG chunks, JPEG segments) tells a truncated file from a
complete one followed by other bytes (a motion photo's video, a trailer some tools append), and
gives the pixel count to check against the limit before a decoder allocates anything.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# JPEG start-of-frame markers (they carry the size); C4 (DHT), C8 (JPG) and CC (DAC) are not frames
_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_STANDALONE = frozenset({0x01, *range(0xD0, 0xD8)})  # TEM and RST0-7 carry no length
EXIF_ROTATIONS = {2: "mirrored", 3: "rotated 180°", 4: "flipped", 5: "transposed",
                  6: "rotated 90° clockwise", 7: "transversed", 8: "rotated 90° counter-clockwise"}


class HeaderError(ValueError):
    """The container structure is broken; the message says how (the caller adds the file name)."""


@dataclass(frozen=True)
class Header:
    """What the container declares: pixel size, where the image data ends, EXIF orientation (1: as stored)."""

    height: int | None  # None: the file did not say (the decoder will)
    width: int | None
    end: int  # bytes of the image proper; anything after is not part of it
    orientation: int = 1


def read_header(kind: str, data: bytes) -> Header:
    """The header of a 'png', 'jpeg', 'bmp' or 'webp' file's bytes; HeaderError when it is cut short or broken."""
    if kind == "png":
        return _png(data)
    if kind == "jpeg":
        return _jpeg(data)
    if kind == "webp":
        return _webp(data)
    return _bmp(data)


def _png(data: bytes) -> Header:
    """Walk the chunks (length, type, data, CRC) to IEND; IHDR gives the size."""
    position, width, height = len(PNG_SIGNATURE), None, None
    while True:
        if position + 8 > len(data):
            raise HeaderError("truncated PNG (it ends before the IEND chunk)")
        length = int.from_bytes(data[position:position + 4], "big")
        kind = data[position + 4:position + 8]
        end = position + 12 + length
        if end > len(data):
            raise HeaderError(f"truncated PNG (the {kind.decode('latin-1')!r} chunk runs past the end of the file)")
        if kind == b"IHDR" and length >= 8:
            width = int.from_bytes(data[position + 8:position + 12], "big")
            height = int.from_bytes(data[position + 12:position + 16], "big")
        if kind == b"IEND":
            return Header(height, width, end)
        position = end


def _jpeg(data: bytes) -> Header:
    """Walk the segments; after each scan, the entropy-coded data up to the next marker; EOI ends it."""
    position, height, width, orientation = 2, None, None, 1
    while True:
        position = data.find(b"\xff", position)
        if position < 0 or position + 1 >= len(data):
            raise HeaderError("truncated JPEG (no end-of-image marker)")
        marker = data[position + 1]
        if marker in (0xFF, 0x00) or marker in _STANDALONE:
            position += 1 if marker == 0xFF else 2  # fill byte, stuffed zero, or a restart marker
            continue
        if marker == 0xD9:
            return Header(height, width, position + 2, orientation)
        if position + 4 > len(data):
            raise HeaderError("truncated JPEG (no end-of-image marker)")
        length = int.from_bytes(data[position + 2:position + 4], "big")
        body = data[position + 4:position + 2 + length]
        if length < 2 or position + 2 + length > len(data):
            raise HeaderError("truncated JPEG (a segment runs past the end of the file)")
        if marker in _SOF_MARKERS and len(body) >= 5:
            height, width = int.from_bytes(body[1:3], "big"), int.from_bytes(body[3:5], "big")
        elif marker == 0xE1 and body.startswith(b"Exif\x00\x00"):
            orientation = _exif_orientation(body[6:])
        position += 2 + length  # after SOS the scan's entropy-coded bytes follow: the loop skips them


def _exif_orientation(tiff: bytes) -> int:
    """The Orientation tag (0x0112) of IFD0 in an EXIF block, 1 when absent or unreadable."""
    if len(tiff) < 8 or tiff[:2] not in (b"II", b"MM"):
        return 1
    order: Literal["little", "big"] = "little" if tiff[:2] == b"II" else "big"
    ifd = int.from_bytes(tiff[4:8], order)
    if ifd + 2 > len(tiff):
        return 1
    count = int.from_bytes(tiff[ifd:ifd + 2], order)
    for entry in range(ifd + 2, min(ifd + 2 + 12 * count, len(tiff) - 11), 12):
        if int.from_bytes(tiff[entry:entry + 2], order) == 0x0112:
            value = int.from_bytes(tiff[entry + 8:entry + 10], order)
            return value if value in EXIF_ROTATIONS else 1
    return 1


def _bmp(data: bytes) -> Header:
    """BITMAPFILEHEADER's declared file size, and the DIB header's width and height."""
    if len(data) < 26:
        raise HeaderError(f"truncated BMP ({len(data)} bytes, too short for its header)")
    declared = int.from_bytes(data[2:6], "little")
    if declared > len(data):
        raise HeaderError(f"truncated BMP ({len(data)} of {declared} bytes)")
    if int.from_bytes(data[14:18], "little") == 12:  # BITMAPCOREHEADER: 16-bit sizes
        width, height = int.from_bytes(data[18:20], "little"), int.from_bytes(data[20:22], "little")
    else:  # height is negative for top-down rows
        width = abs(int.from_bytes(data[18:22], "little", signed=True))
        height = abs(int.from_bytes(data[22:26], "little", signed=True))
    return Header(height, width, declared or len(data))


def _webp(data: bytes) -> Header:
    """The RIFF container's declared size, and the size its first chunk gives (VP8, VP8L or VP8X)."""
    if len(data) < 30:
        raise HeaderError(f"truncated WebP ({len(data)} bytes, too short for its header)")
    end = 8 + int.from_bytes(data[4:8], "little")
    if end > len(data):
        raise HeaderError(f"truncated WebP ({len(data)} of {end} bytes)")
    chunk, width, height = data[12:16], None, None
    if chunk == b"VP8 " and data[23:26] == b"\x9d\x01\x2a":  # lossy: key frame start code, then 14-bit sizes
        width = int.from_bytes(data[26:28], "little") & 0x3FFF
        height = int.from_bytes(data[28:30], "little") & 0x3FFF
    elif chunk == b"VP8L" and data[20] == 0x2F:  # lossless: 14-bit width - 1, 14-bit height - 1
        bits = int.from_bytes(data[21:25], "little")
        width, height = (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    elif chunk == b"VP8X":  # extended: 24-bit canvas width - 1, height - 1
        width = int.from_bytes(data[24:27], "little") + 1
        height = int.from_bytes(data[27:30], "little") + 1
    return Header(height, width, end)


def apply_orientation(pixels: np.ndarray, orientation: int) -> np.ndarray:
    """(H, W[, C]) as stored -> as the camera meant it to be seen (EXIF orientation 1..8)."""
    if orientation == 2:
        pixels = pixels[:, ::-1]
    elif orientation == 3:
        pixels = pixels[::-1, ::-1]
    elif orientation == 4:
        pixels = pixels[::-1]
    elif orientation == 5:
        pixels = pixels.swapaxes(0, 1)
    elif orientation == 6:
        pixels = np.rot90(pixels, -1)
    elif orientation == 7:
        pixels = pixels.swapaxes(0, 1)[::-1, ::-1]
    elif orientation == 8:
        pixels = np.rot90(pixels, 1)
    return np.ascontiguousarray(pixels)
