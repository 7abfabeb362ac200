"""Property-based: any bytes given as an image decode or raise ImageReadError; nothing else escapes and
nothing is written (issue 18). Seeds are real PNG/JPEG/TIFF/BMP files, truncated, bit-flipped, extended."""
from __future__ import annotations

import tempfile
from pathlib import Path

import cv2
import numpy as np
import tifffile
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leanseg.core.io.images import ImageData, ImageReadError, read_image

EXAMPLES = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LIMIT = 4_000_000  # pixels: a mutated header may claim any size; none is decoded above this


def _real_files() -> dict[str, bytes]:
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 255, (24, 40, 3), dtype=np.uint8)
    files = {suffix: cv2.imencode(suffix, pixels)[1].tobytes() for suffix in (".png", ".jpg", ".bmp")}
    with tempfile.TemporaryDirectory() as folder:
        for name, kwargs in (("contig.tif", {}), ("planar.tif", {"planarconfig": "separate"}),
                             ("zlib.tif", {"compression": "zlib"})):
            path = Path(folder) / name
            data = np.moveaxis(pixels, -1, 0) if "planar" in name else pixels
            tifffile.imwrite(path, data, photometric="rgb", **kwargs)
            files[name] = path.read_bytes()
    return files


REAL = _real_files()


def _check(data: bytes, name: str = "input") -> None:
    """read_image on `data` gives an image or ImageReadError, and leaves the folder as it was."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_bytes(data)
        try:
            image = read_image(path, max_pixels=LIMIT)
        except ImageReadError as err:
            assert str(path) in str(err)
        else:
            assert isinstance(image, ImageData)
            assert image.pixels.dtype in (np.uint8, np.uint16)
            assert image.pixels.ndim == 2 or image.pixels.shape[2] in (3, 4)
            assert image.height * image.width <= LIMIT
        assert sorted(p.name for p in Path(folder).iterdir()) == [name]


@EXAMPLES
@given(st.sampled_from([b"", b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"BM", b"II*\x00", b"MM\x00*", b"II+\x00"]),
       st.binary(max_size=2048))
def test_random_bytes_behind_any_signature(signature: bytes, body: bytes) -> None:
    _check(signature + body)


@EXAMPLES
@given(st.sampled_from(sorted(REAL)), st.floats(0.0, 1.0))
def test_truncated_real_files(kind: str, keep: float) -> None:
    data = REAL[kind]
    _check(data[: int(len(data) * keep)], f"cut{Path(kind).suffix}")


@EXAMPLES
@given(st.sampled_from(sorted(REAL)), st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 7)), min_size=1,
                                               max_size=8), st.binary(max_size=300))
def test_bit_flipped_real_files(kind: str, flips: list[tuple[int, int]], trailer: bytes) -> None:
    data = bytearray(REAL[kind])
    for position, bit in flips:
        data[position % len(data)] ^= 1 << bit
    _check(bytes(data) + trailer, f"flipped{Path(kind).suffix}")
