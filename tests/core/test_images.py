from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
import tifffile

from leanseg.core.io.images import ImageReadError, read_image, to_model_input, to_rgb8

RNG = np.random.default_rng(1)


def _write(path: Path, pixels: np.ndarray) -> Path:
    if path.suffix in (".tif", ".tiff"):
        tifffile.imwrite(path, pixels)
    else:
        assert cv2.imwrite(str(path), pixels)
    return path


@pytest.mark.parametrize(
    "name, pixels",
    [
        ("gray.png", RNG.integers(0, 255, (20, 30), dtype=np.uint8)),
        ("rgb.jpg", RNG.integers(0, 255, (20, 30, 3), dtype=np.uint8)),
        ("rgb.bmp", RNG.integers(0, 255, (20, 30, 3), dtype=np.uint8)),
        ("rgba.png", RNG.integers(0, 255, (20, 30, 4), dtype=np.uint8)),
        ("deep.png", RNG.integers(0, 65535, (20, 30, 3), dtype=np.uint16)),
        ("deep.tif", RNG.integers(0, 65535, (20, 30), dtype=np.uint16)),
        ("float.tif", RNG.random((20, 30)).astype(np.float32)),
    ],
)
def test_every_kind_reaches_the_model_as_rgb(tmp_path: Path, name: str, pixels: np.ndarray) -> None:
    image = read_image(_write(tmp_path / name, pixels))
    assert (image.height, image.width) == (20, 30)
    x = to_model_input(image, 3, (0.5, 0.5, 0.5), (0.25, 0.25, 0.25))
    assert x.shape == (3, 20, 30) and x.dtype == np.float32
    assert -2.01 <= x.min() and x.max() <= 2.01
    assert to_rgb8(image).shape == (20, 30, 3)


def test_png_colour_order_is_rgb(tmp_path: Path) -> None:
    bgr = np.zeros((4, 4, 3), np.uint8)
    bgr[..., 2] = 200  # red in OpenCV's BGR
    image = read_image(_write(tmp_path / "red.png", bgr))
    assert image.pixels[0, 0].tolist() == [200, 0, 0]


def test_multipage_tiff_reads_first_page_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "stack.tif"
    tifffile.imwrite(path, np.stack([np.full((8, 9), v, np.uint8) for v in (10, 20, 30)]), photometric="minisblack")
    image = read_image(path)
    assert image.pixels.shape == (8, 9) and int(image.pixels[0, 0]) == 10
    assert "first of 3 pages" in image.note


@pytest.mark.parametrize(
    "name, content, reason",
    [
        ("empty.png", b"", "empty"),
        ("text.jpg", b"this is not an image at all\n", "not an image"),
        ("folder", None, "folder"),
        ("missing.png", "missing", "no such file"),
    ],
)
def test_bad_inputs_raise_one_error_type(tmp_path: Path, name: str, content: object, reason: str) -> None:
    path = tmp_path / name
    if content is None:
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    with pytest.raises(ImageReadError, match=reason) as info:
        read_image(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("name", ["cut.png", "cut.jpg", "cut.tif"])
def test_truncated_files(tmp_path: Path, name: str) -> None:
    whole = _write(tmp_path / f"whole{Path(name).suffix}", RNG.integers(0, 255, (64, 64, 3), dtype=np.uint8))
    data = whole.read_bytes()
    path = tmp_path / name
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ImageReadError, match=str(path)):
        read_image(path)


def test_pixel_limit_refuses_before_decoding(tmp_path: Path) -> None:
    path = _write(tmp_path / "big.png", np.zeros((100, 100), np.uint8))
    with pytest.raises(ImageReadError, match="exceeds the limit"):
        read_image(path, max_pixels=5000)
