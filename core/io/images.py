"""Read images of any common kind into one array form, with one error type."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import tifffile

from .image_headers import EXIF_ROTATIONS, PNG_SIGNATURE, HeaderError, apply_orientation, read_header
from .pixel_range import choose_white, to_uint16

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp")
DEFAULT_MAX_PIXELS = 1_000_000_000  # refuse larger images before decoding


class ImageReadError(Exception):
    """An input that is not a readable image; the message names the file and the reason."""

    def __init__(self, path: str | Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = Path(path)
        self.reason = reason


@dataclass
class ImageData:
    """Pixels as read: (H, W) or (H, W, C) with C in 1, 3, 4 (RGB order), uint8 or uint16 (other sample types
    become uint16 as `pixel_range.to_uint16` says; `note` says how)."""

    pixels: np.ndarray
    path: Path | None = None
    note: str = ""  # e.g. "first of 3 pages"
    white: int = 0  # the stored value the model sees as 1.0; 0: the type's largest (255, 65535)
    source_type: str = ""  # the file's sample type when it was not uint8 or uint16 ("float32"), else ""

    @property
    def height(self) -> int:
        return int(self.pixels.shape[0])

    @property
    def width(self) -> int:
        return int(self.pixels.shape[1])

    @property
    def bit_depth(self) -> int:
        return 16 if self.pixels.dtype == np.uint16 else 8

    @property
    def depth_text(self) -> str:
        """How the app names the file's samples: "8-bit", "16-bit", "float32" (the note says how they were read)."""
        return self.source_type or f"{self.bit_depth}-bit"

    @property
    def full_scale(self) -> int:
        """The value divided by for the model: `white`, else the type's largest."""
        return self.white or (65535 if self.bit_depth == 16 else 255)

    def like(self, pixels: np.ndarray) -> ImageData:
        """Other pixels of this image (a tile, a region) read the same way: the same white."""
        return ImageData(pixels, self.path, white=self.white)


def set_max_pixels(limit: int) -> None:
    """The pixel limit `read_image` and large-TIFF reading apply when not given one (`--max-pixels`).

    A process-wide default, as Pillow's Image.MAX_IMAGE_PIXELS: the CLI sets it once from its option.
    """
    global _max_pixels
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"the pixel limit must be a positive whole number, got {limit!r}")
    _max_pixels = limit


def max_pixels() -> int:
    """The pixel limit in force (DEFAULT_MAX_PIXELS unless `set_max_pixels` changed it)."""
    return _max_pixels


_max_pixels = DEFAULT_MAX_PIXELS


def _read_head(path: Path) -> bytes:
    """The file's first 16 bytes; ImageReadError when it is missing, a folder, empty or cannot be read."""
    try:
        if not path.exists():
            raise ImageReadError(path, "no such file")
        if path.is_dir():
            raise ImageReadError(path, "is a folder, not an image")
        if path.stat().st_size == 0:
            raise ImageReadError(path, "file is empty (0 bytes)")
        with path.open("rb") as handle:
            return handle.read(16)
    except OSError as err:  # no permission, on the file or a folder above it
        raise ImageReadError(path, f"cannot read it ({err.strerror or err})") from None


def read_image(path: str | Path, max_pixels: int | None = None) -> ImageData:
    """Decode PNG, JPEG, BMP, TIFF or WebP; raise ImageReadError for anything unreadable.

    Images above `max_pixels` (default: the process limit, `set_max_pixels`) are refused before
    decoding. A JPEG's EXIF orientation is applied, and `note` says so.
    """
    limit = _max_pixels if max_pixels is None else max_pixels
    path = Path(path)
    head = _read_head(path)
    if head[:4] in (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+"):
        image = _read_tiff(path, limit)
    else:
        image = _read_with_opencv(path, head, limit)
    pixels = image.pixels
    if pixels.size == 0:
        raise ImageReadError(path, "image has no pixels")
    notes = [image.note] if image.note else []
    conversion: list[str] = []  # how values of another type were scaled (none: kept as they are)
    if pixels.dtype not in (np.uint8, np.uint16):
        if not (np.issubdtype(pixels.dtype, np.number) or pixels.dtype == bool):
            raise ImageReadError(path, f"unsupported pixel type {pixels.dtype}")
        image.source_type = str(pixels.dtype)
        pixels, conversion = to_uint16(pixels)
        notes += conversion
    if pixels.dtype == np.uint16 and not conversion:  # stored values, not scaled ones
        image.white, said = choose_white(largest_colour(pixels), image.white)  # image.white: the file's, or 0
        notes += [said] if said else []
    image.note = "; ".join(notes)
    if pixels.ndim == 3 and pixels.shape[2] == 1:
        pixels = pixels[:, :, 0]
    if pixels.ndim not in (2, 3) or (pixels.ndim == 3 and pixels.shape[2] not in (3, 4)):
        channels = min(pixels.shape) if pixels.ndim == 3 else 0
        hint = (f": {channels} channels; save the one to segment, or an RGB composite of them, as its own image"
                if 1 < channels <= 16 else "")
        raise ImageReadError(path, f"unsupported pixel layout {pixels.shape}; expected HxW, HxWx3 or HxWx4{hint}")
    image.pixels = pixels
    return image


def check_pixels(path: str | Path, height: int, width: int, limit: int, option: str = "--max-pixels") -> None:
    """ImageReadError when height x width exceeds `limit`; the message names the option that raises it."""
    if height * width > limit:
        raise ImageReadError(
            path,
            f"{width}x{height} = {height * width:,} pixels exceeds the limit of {limit:,} pixels "
            f"(raise it with {option})",
        )


def _read_tiff(path: Path, limit: int) -> ImageData:
    try:
        with tifffile.TiffFile(path) as tif:
            pages = len(tif.pages)
            page = tif.pages[0]
            assert isinstance(page, tifffile.TiffPage)  # the first page is never a TiffFrame
            # Count pixels from the tags, whatever the layout: planar (S, Y, X), contiguous (Y, X, S), volumes
            check_pixels(path, int(page.imagelength) * max(1, int(page.imagedepth)), int(page.imagewidth), limit)
            if page.samplesperpixel > 4:
                raise ImageReadError(path, f"unsupported TIFF: {page.samplesperpixel} samples per pixel "
                                           "(expected 1 gray, 3 RGB or 4 RGBA)")
            compression = str(getattr(page.compression, "name", page.compression))  # an enum at run time
            declared = declared_white(page)
            try:
                pixels = page.asarray()
            except (ValueError, ImportError) as err:  # a codec tifffile has only through imagecodecs
                if not isinstance(err, ImportError) and "imagecodecs" not in str(err):
                    raise
                pixels = _decode_tiff_with_opencv(path, compression)
    except ImageReadError:
        raise
    except Exception as err:  # tifffile raises many types for damaged files
        raise ImageReadError(path, f"not a readable TIFF ({type(err).__name__}: {err})") from err
    if pixels.ndim == 3 and pixels.shape[0] in (3, 4) and pixels.shape[2] not in (3, 4):
        pixels = np.moveaxis(pixels, 0, -1)  # planar CHW -> HWC
    note = f"first of {pages} pages" if pages > 1 else ""
    return ImageData(np.ascontiguousarray(pixels), path, note, white=declared)


def largest_colour(pixels: np.ndarray) -> int:
    """The largest value of the colour channels (an alpha channel aside)."""
    return int((pixels[..., :3] if pixels.ndim == 3 and pixels.shape[2] == 4 else pixels).max())


def declared_white(page: tifffile.TiffPage) -> int:
    """A 16-bit TIFF's MaxSampleValue tag when it names a white below 65535 (a 12-bit camera's 4095), else 0."""
    tag = page.tags.get("MaxSampleValue")
    if tag is None or page.dtype != np.uint16:
        return 0
    values = tag.value if isinstance(tag.value, tuple) else (tag.value,)
    white = max((int(v) for v in values), default=0)
    return white if 0 < white < 65535 else 0


def _decode_tiff_with_opencv(path: Path, compression: str) -> np.ndarray:
    """The first page of a TIFF whose compression tifffile decodes only with imagecodecs (LZW, JPEG, ...): OpenCV's
    libtiff reads the common ones. RGB(A) order, as tifffile gives it."""
    pixels = cv2.imdecode(np.fromfile(path, np.uint8), cv2.IMREAD_UNCHANGED)
    if pixels is None:
        raise ImageReadError(path, f"unsupported TIFF compression {compression}: neither tifffile (without the "
                                   "imagecodecs package) nor OpenCV decodes it; save it uncompressed or with "
                                   "LZW or deflate, or pip install imagecodecs")
    if pixels.ndim == 3 and pixels.shape[2] in (3, 4):
        pixels = cv2.cvtColor(pixels, cv2.COLOR_BGR2RGB if pixels.shape[2] == 3 else cv2.COLOR_BGRA2RGBA)
    return np.asarray(pixels)


def _read_with_opencv(path: Path, head: bytes, limit: int) -> ImageData:
    kind = _sniff(head)
    if kind is None:
        raise ImageReadError(path, "not an image (unknown file signature); expected PNG, JPEG, BMP, TIFF or WebP")
    data = path.read_bytes()
    try:
        header = read_header(kind, data)
    except HeaderError as err:  # cut short: decoders would paper over the missing part with grey pixels
        raise ImageReadError(path, str(err)) from None
    if header.height is not None and header.width is not None:
        check_pixels(path, header.height, header.width, limit)
    encoded = np.frombuffer(data, np.uint8, count=min(header.end, len(data)))  # trailing bytes left out
    pixels = cv2.imdecode(encoded, cv2.IMREAD_UNCHANGED)  # no EXIF rotation here: applied below, and said
    del data, encoded
    if pixels is None:
        raise ImageReadError(path, f"could not decode the {kind.upper()} data (damaged file?)")
    check_pixels(path, pixels.shape[0], pixels.shape[1], limit)
    if pixels.ndim == 3 and pixels.shape[2] == 3:
        cv2.cvtColor(pixels, cv2.COLOR_BGR2RGB, dst=pixels)  # in place: no second copy of a large image
    elif pixels.ndim == 3 and pixels.shape[2] == 4:
        cv2.cvtColor(pixels, cv2.COLOR_BGRA2RGBA, dst=pixels)
    note = ""
    if header.orientation != 1:
        pixels = apply_orientation(pixels, header.orientation)
        note = f"{EXIF_ROTATIONS[header.orientation]} as its EXIF orientation ({header.orientation}) says"
    return ImageData(pixels, path, note)


def _sniff(head: bytes) -> str | None:
    if head.startswith(PNG_SIGNATURE):
        return "png"
    if head.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if head.startswith(b"BM"):
        return "bmp"
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "webp"
    return None


ALPHA_IGNORED = "alpha channel ignored: transparent pixels are segmented with their stored colour"


def has_transparency(image: ImageData) -> bool:
    """True for (H, W, 4) pixels with any alpha below opaque: the model sees only RGB, so they are segmented as
    their stored colour, not as what shows through."""
    pixels = image.pixels
    if pixels.ndim != 3 or pixels.shape[2] != 4:
        return False
    opaque = np.iinfo(pixels.dtype).max if np.issubdtype(pixels.dtype, np.integer) else 1.0
    return bool((pixels[:, :, 3] < opaque).any())


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


def to_model_rgb8(image: ImageData) -> np.ndarray:
    """(H, W, 3) uint8 on the scale the model sees (pixels * 255 / white, not the display's stretch): what training
    learns from, so a model trained on 12-bit or float images sees them at inference as it saw them then."""
    if image.bit_depth == 8:
        return to_rgb8(image)
    pixels = image.pixels[:, :, :3] if image.pixels.ndim == 3 and image.pixels.shape[2] == 4 else image.pixels
    scaled = np.clip(pixels.astype(np.float32) * (255.0 / image.full_scale), 0, 255)
    return to_rgb8(ImageData(np.rint(scaled).astype(np.uint8)))


def to_model_input(image: ImageData, in_channels: int, mean: tuple[float, ...], std: tuple[float, ...]) -> np.ndarray:
    """(C, H, W) float32 normalised for the model: pixels / white (`ImageData.full_scale`), minus mean, over std."""
    pixels = image.pixels
    if pixels.ndim == 3 and pixels.shape[2] == 4:
        pixels = pixels[:, :, :3]  # drop alpha
    scale = 1.0 / image.full_scale
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
