"""Read images of any common kind into one array form, with one error type."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import tifffile

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff")
DEFAULT_MAX_PIXELS = 1_000_000_000  # refuse larger images before decoding


class ImageReadError(Exception):
    """An input that is not a readable image; the message names the file and the reason."""

    def __init__(self, path: str | Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = Path(path)
        self.reason = reason


@dataclass
class ImageData:
    """Pixels as read: (H, W) or (H, W, C) with C in 1, 3, 4 (RGB order), uint8 or uint16."""

    pixels: np.ndarray
    path: Path | None = None
    note: str = ""  # e.g. "first of 3 pages"

    @property
    def height(self) -> int:
        return int(self.pixels.shape[0])

    @property
    def width(self) -> int:
        return int(self.pixels.shape[1])

    @property
    def bit_depth(self) -> int:
        return 16 if self.pixels.dtype == np.uint16 else 8


def read_image(path: str | Path, max_pixels: int = DEFAULT_MAX_PIXELS) -> ImageData:
    """Decode PNG, JPEG, BMP or TIFF; raise ImageReadError for anything unreadable."""
    path = Path(path)
    if not path.exists():
        raise ImageReadError(path, "no such file")
    if path.is_dir():
        raise ImageReadError(path, "is a folder, not an image")
    size = path.stat().st_size
    if size == 0:
        raise ImageReadError(path, "file is empty (0 bytes)")
    with path.open("rb") as handle:
        head = handle.read(16)
    if head[:4] in (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+"):
        image = _read_tiff(path, max_pixels)
    else:
        image = _read_with_opencv(path, head, max_pixels)
    pixels = image.pixels
    if pixels.size == 0:
        raise ImageReadError(path, "image has no pixels")
    if pixels.dtype not in (np.uint8, np.uint16):
        pixels = _to_uint16(path, pixels)
    if pixels.ndim == 3 and pixels.shape[2] == 1:
        pixels = pixels[:, :, 0]
    if pixels.ndim not in (2, 3) or (pixels.ndim == 3 and pixels.shape[2] not in (3, 4)):
        raise ImageReadError(path, f"unsupported pixel layout {pixels.shape}; expected HxW, HxWx3 or HxWx4")
    image.pixels = pixels
    return image


def _check_pixels(path: Path, height: int, width: int, max_pixels: int) -> None:
    if height * width > max_pixels:
        raise ImageReadError(
            path,
            f"{width}x{height} = {height * width / 1e6:.0f} megapixels exceeds the limit of "
            f"{max_pixels / 1e6:.0f} megapixels (raise it with --max-pixels)",
        )


def _read_tiff(path: Path, max_pixels: int) -> ImageData:
    try:
        with tifffile.TiffFile(path) as tif:
            pages = len(tif.pages)
            page = tif.pages[0]
            shape = page.shape  # type: ignore[union-attr]
            _check_pixels(path, int(shape[0]), int(shape[1]), max_pixels)
            pixels = page.asarray()  # type: ignore[union-attr]
    except ImageReadError:
        raise
    except Exception as err:  # tifffile raises many types for damaged files
        raise ImageReadError(path, f"not a readable TIFF ({type(err).__name__}: {err})") from err
    if pixels.ndim == 3 and pixels.shape[0] in (3, 4) and pixels.shape[2] not in (3, 4):
        pixels = np.moveaxis(pixels, 0, -1)  # planar CHW -> HWC
    note = f"first of {pages} pages" if pages > 1 else ""
    return ImageData(np.ascontiguousarray(pixels), path, note)


def _read_with_opencv(path: Path, head: bytes, max_pixels: int) -> ImageData:
    kind = _sniff(head)
    if kind is None:
        raise ImageReadError(path, "not an image (unknown file signature); expected PNG, JPEG, BMP or TIFF")
    data = np.fromfile(path, dtype=np.uint8)
    _check_complete(path, kind, data)
    if kind == "png" and len(data) >= 24:
        width, height = int.from_bytes(data[16:20].tobytes(), "big"), int.from_bytes(data[20:24].tobytes(), "big")
        _check_pixels(path, height, width, max_pixels)
    pixels = cv2.imdecode(data, cv2.IMREAD_UNCHANGED)
    if pixels is None:
        raise ImageReadError(path, f"could not decode the {kind.upper()} data (damaged file?)")
    _check_pixels(path, pixels.shape[0], pixels.shape[1], max_pixels)
    if pixels.ndim == 3 and pixels.shape[2] == 3:
        pixels = cv2.cvtColor(pixels, cv2.COLOR_BGR2RGB)
    elif pixels.ndim == 3 and pixels.shape[2] == 4:
        pixels = cv2.cvtColor(pixels, cv2.COLOR_BGRA2RGBA)
    return ImageData(pixels, path)


def _sniff(head: bytes) -> str | None:
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if head.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if head.startswith(b"BM"):
        return "bmp"
    return None


def _check_complete(path: Path, kind: str, data: np.ndarray) -> None:
    """Catch truncation that decoders would silently paper over with grey pixels."""
    tail = data[-16:].tobytes()
    if kind == "png" and b"IEND" not in tail:
        raise ImageReadError(path, "truncated PNG (no IEND chunk at the end)")
    if kind == "jpeg" and b"\xff\xd9" not in data[-64:].tobytes():
        raise ImageReadError(path, "truncated JPEG (no end-of-image marker)")
    if kind == "bmp" and len(data) >= 6:
        declared = int.from_bytes(data[2:6].tobytes(), "little")
        if declared > len(data):
            raise ImageReadError(path, f"truncated BMP ({len(data)} of {declared} bytes)")


def _to_uint16(path: Path, pixels: np.ndarray) -> np.ndarray:
    if pixels.dtype == bool:
        return pixels.astype(np.uint8) * 255
    if np.issubdtype(pixels.dtype, np.integer) or np.issubdtype(pixels.dtype, np.floating):
        finite = np.nan_to_num(pixels.astype(np.float64))
        low, high = float(finite.min()), float(finite.max())
        scale = 65535.0 / (high - low) if high > low else 0.0
        return ((finite - low) * scale).astype(np.uint16)
    raise ImageReadError(path, f"unsupported pixel type {pixels.dtype}")


def to_rgb8(image: ImageData) -> np.ndarray:
    """(H, W, 3) uint8 for display and overlays; 16-bit is auto-contrasted (0.5-99.5%)."""
    pixels = image.pixels
    if pixels.ndim == 3 and pixels.shape[2] == 4:
        pixels = pixels[:, :, :3]
    if pixels.dtype == np.uint16:
        low, high = np.percentile(pixels[:: max(1, pixels.shape[0] // 512)], (0.5, 99.5))
        scale = 255.0 / max(float(high - low), 1.0)
        pixels = np.clip((pixels.astype(np.float32) - low) * scale, 0, 255).astype(np.uint8)
    if pixels.ndim == 2:
        pixels = np.repeat(pixels[:, :, None], 3, axis=2)
    return np.ascontiguousarray(pixels)


def to_model_input(image: ImageData, in_channels: int, mean: tuple[float, ...], std: tuple[float, ...]) -> np.ndarray:
    """(C, H, W) float32 normalised for the model: pixels / max value, minus mean, over std."""
    pixels = image.pixels
    if pixels.ndim == 3 and pixels.shape[2] == 4:
        pixels = pixels[:, :, :3]  # drop alpha
    scale = 1.0 / (65535.0 if pixels.dtype == np.uint16 else 255.0)
    if in_channels == 3 and pixels.ndim == 2:
        pixels = np.repeat(pixels[:, :, None], 3, axis=2)
    elif in_channels == 1 and pixels.ndim == 3:
        pixels = cv2.cvtColor(pixels, cv2.COLOR_RGB2GRAY)
    chw = pixels[None] if pixels.ndim == 2 else np.moveaxis(pixels, -1, 0)
    out = chw.astype(np.float32)  # the only copy: scaled and normalised in place
    out *= scale
    mean_arr = np.asarray(mean, np.float32)[:, None, None]
    std_arr = np.asarray(std, np.float32)[:, None, None]
    out -= mean_arr
    out /= std_arr
    return out
