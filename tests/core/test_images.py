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
        ("rgb.webp", RNG.integers(0, 255, (20, 30, 3), dtype=np.uint8)),
        ("rgba.webp", RNG.integers(0, 255, (20, 30, 4), dtype=np.uint8)),
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


@pytest.mark.parametrize("suffix", [".png", ".webp"])
def test_colour_order_is_rgb(tmp_path: Path, suffix: str) -> None:
    bgr = np.zeros((4, 4, 3), np.uint8)
    bgr[..., 2] = 200  # red in OpenCV's BGR
    image = read_image(_write(tmp_path / f"red{suffix}", bgr))
    assert image.pixels[0, 0].tolist() == [200, 0, 0]


def test_lossless_webp_reads_back_exactly_and_a_cut_one_says_truncated(tmp_path: Path) -> None:
    pixels = RNG.integers(0, 255, (21, 35, 3), dtype=np.uint8)
    path = tmp_path / "exact.webp"
    assert cv2.imwrite(str(path), pixels, [cv2.IMWRITE_WEBP_QUALITY, 101])  # above 100: lossless
    assert np.array_equal(read_image(path).pixels, pixels[..., ::-1])
    cut = tmp_path / "cut.webp"
    cut.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(ImageReadError, match=f"{cut}: truncated WebP"):
        read_image(cut)


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


@pytest.mark.parametrize("name", ["cut.png", "cut.jpg", "cut.tif", "cut.webp"])
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


# --- issue 18, finding 7: the pixel limit counts pixels in every layout --------------------------

def test_planar_tiff_counts_pixels_not_planes(tmp_path: Path) -> None:
    """(3, H, W) planar: the limit is H x W, not 3 x H; refused before the pixels are decoded."""
    import tracemalloc

    path = tmp_path / "planar.tif"
    tifffile.imwrite(path, np.zeros((3, 400, 500), np.uint8), photometric="rgb", planarconfig="separate",
                     compression="zlib")
    assert read_image(path).pixels.shape == (400, 500, 3)
    tracemalloc.start()
    try:
        with pytest.raises(ImageReadError,
                           match=r"500x400 = 200,000 pixels exceeds the limit of 100,000 pixels .*--max-pixels"):
            read_image(path, max_pixels=100_000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * 400 * 500 // 2, f"{peak} bytes traced: the pixels were decoded before the check"


def test_jpeg_and_bmp_sizes_are_checked_before_decoding(tmp_path: Path) -> None:
    for name in ("big.jpg", "big.bmp", "big.webp"):
        path = _write(tmp_path / name, np.zeros((300, 200, 3), np.uint8))
        with pytest.raises(ImageReadError, match="200x300 = 60,000 pixels exceeds the limit of 59,999 pixels"):
            read_image(path, max_pixels=59_999)
        assert read_image(path, max_pixels=60_000).pixels.shape == (300, 200, 3)


# --- finding 8: trailing bytes, truncation, EXIF orientation ------------------------------------

def _encoded(suffix: str, pixels: np.ndarray) -> bytes:
    ok, data = cv2.imencode(suffix, pixels)
    assert ok
    return data.tobytes()


@pytest.mark.parametrize("suffix", [".jpg", ".png"])
def test_trailing_bytes_after_a_complete_image_are_ignored(tmp_path: Path, suffix: str) -> None:
    """A motion photo appends a video after the JPEG's end-of-image marker; some tools append to PNGs."""
    clean = _encoded(suffix, RNG.integers(0, 255, (48, 64, 3), dtype=np.uint8))
    trailer = b"\x00\x00\x00\xc8ftypmp42" + bytes(range(188))  # 200 bytes: the start of an MP4
    whole, padded = tmp_path / f"whole{suffix}", tmp_path / f"padded{suffix}"
    whole.write_bytes(clean)
    padded.write_bytes(clean + trailer)
    assert np.array_equal(read_image(padded).pixels, read_image(whole).pixels)


@pytest.mark.parametrize("suffix", [".jpg", ".png"])
@pytest.mark.parametrize("keep", [0.3, 0.6, 0.95])
def test_truncated_files_keep_a_precise_refusal(tmp_path: Path, suffix: str, keep: float) -> None:
    data = _encoded(suffix, RNG.integers(0, 255, (48, 64, 3), dtype=np.uint8))
    path = tmp_path / f"cut{suffix}"
    path.write_bytes(data[: int(len(data) * keep)])
    kind = "JPEG" if suffix == ".jpg" else "PNG"
    with pytest.raises(ImageReadError, match=f"{path}: truncated {kind}"):
        read_image(path)


def exif_jpeg(pixels: np.ndarray, orientation: int) -> bytes:
    """A JPEG of `pixels` (BGR, as stored) with an EXIF block saying `orientation` (as cameras write it)."""
    tiff = b"II*\x00" + (8).to_bytes(4, "little") + (1).to_bytes(2, "little")
    tiff += (0x0112).to_bytes(2, "little") + (3).to_bytes(2, "little") + (1).to_bytes(4, "little")
    tiff += orientation.to_bytes(2, "little") + b"\x00\x00" + (0).to_bytes(4, "little")
    body = b"Exif\x00\x00" + tiff
    app1 = b"\xff\xe1" + (len(body) + 2).to_bytes(2, "big") + body
    data = _encoded(".jpg", pixels)
    return data[:2] + app1 + data[2:]


@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_orientation_is_applied_as_opencv_applies_it(tmp_path: Path, orientation: int) -> None:
    stored = np.zeros((40, 64, 3), np.uint8)
    stored[:10, :16] = (0, 0, 255)  # a red block at the top-left of the stored pixels
    path = tmp_path / f"o{orientation}.jpg"
    path.write_bytes(exif_jpeg(stored, orientation))
    image = read_image(path)
    shown = cv2.cvtColor(cv2.imread(str(path), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)  # OpenCV applies EXIF here
    assert np.array_equal(image.pixels, shown)
    assert image.pixels.shape[:2] == ((64, 40) if orientation >= 5 else (40, 64))
    if orientation == 1:
        assert image.note == ""
    else:
        assert f"EXIF orientation ({orientation})" in image.note


# --- TIFFs whose compression tifffile decodes only with imagecodecs (not a dependency) ---------------

@pytest.mark.parametrize(("compression", "flag"), [("lzw", 5), ("jpeg", 7)])
def test_lzw_and_jpeg_tiffs_written_by_opencv_read_without_imagecodecs(tmp_path: Path, compression: str,
                                                                        flag: int) -> None:
    rgb = RNG.integers(0, 255, (40, 50, 3), dtype=np.uint8)
    path = tmp_path / f"{compression}.tif"
    assert cv2.imwrite(str(path), cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_TIFF_COMPRESSION, flag])
    with tifffile.TiffFile(path) as tif:
        assert tif.pages[0].compression == flag
    pixels = read_image(path).pixels
    assert pixels.shape == (40, 50, 3)
    if compression == "lzw":  # lossless: the same pixels, in RGB order
        assert np.array_equal(pixels, rgb)
    else:
        assert np.abs(pixels.astype(int) - rgb).mean() < 40  # lossy, but not channel-swapped noise


def test_lzw_16_bit_tiff_keeps_its_depth(tmp_path: Path) -> None:
    gray = RNG.integers(0, 65535, (30, 20), dtype=np.uint16)
    path = tmp_path / "gray16.tif"
    assert cv2.imwrite(str(path), gray)  # OpenCV writes TIFFs with LZW
    assert np.array_equal(read_image(path).pixels, gray)


def test_tiff_compression_no_decoder_reads_is_named(tmp_path: Path) -> None:
    try:
        import imagecodecs  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("imagecodecs is installed: tifffile decodes the file itself")
    path = tmp_path / "zstd.tif"
    tifffile.imwrite(path, np.zeros((8, 9), np.uint8))
    with tifffile.TiffFile(path, mode="r+b") as tif:
        tif.pages[0].tags["Compression"].overwrite(50000)  # ZSTD: neither tifffile alone nor OpenCV decodes it
    with pytest.raises(ImageReadError, match=rf"{path}: unsupported TIFF compression ZSTD: .*pip install imagecodecs"):
        read_image(path)
