"""Which stored value is white: 12-bit data in 16-bit files, float images with hot pixels, NaN and infinity, and
other integer types, read from real TIFFs and segmented with the shipped model as their 8-bit picture is."""
from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
import tifffile

from leanseg.core.assets import default_model_path
from leanseg.core.io.images import ImageData, ImageReadError, read_image, to_model_input
from leanseg.core.io.large import MappedTiff, mappable_tiff
from leanseg.core.jobs.segment_large import segment_large_tiff
from leanseg.core.model.checkpoint import load_checkpoint
from leanseg.core.predict import InferenceOptions, Segmenter

SAMPLE = Path(__file__).parents[2] / "assets" / "samples" / "camvid_0016E5_07959.png"
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


@pytest.fixture(scope="module")
def photo() -> np.ndarray:
    return read_image(SAMPLE).pixels  # (360, 480, 3) uint8


@pytest.fixture(scope="module")
def segmenter() -> Segmenter:
    return Segmenter(load_checkpoint(default_model_path()), InferenceOptions(device="cpu", tiling="off",
                                                                             mirror="off"))


def written(path: Path, pixels: np.ndarray) -> ImageData:
    tifffile.imwrite(path, pixels)
    return read_image(path)


def agreement(segmenter: Segmenter, image: ImageData, photo: np.ndarray) -> float:
    return float((segmenter.segment(image).labels == segmenter.segment(ImageData(photo)).labels).mean())


@pytest.mark.parametrize("bits", [12, 14])
def test_a_16_bit_file_of_fewer_bits_is_read_with_its_own_white(tmp_path: Path, photo: np.ndarray, bits: int,
                                                               segmenter: Segmenter) -> None:
    deep = (photo.astype(np.uint32) * (2**bits - 1) // 255).astype(np.uint16)  # the camera's values
    image = written(tmp_path / f"camera{bits}.tif", deep)
    white = 2**bits - 1
    assert image.white == white and image.depth_text == "16-bit"
    assert f"{bits}-bit values (largest {deep.max()}): {white} is white" in image.note
    x, reference = to_model_input(image, 3, MEAN, STD), to_model_input(ImageData(photo), 3, MEAN, STD)
    assert np.abs(x - reference).max() < 0.01  # the model sees the same picture
    assert agreement(segmenter, image, photo) > 0.99


def test_a_16_bit_file_that_uses_its_top_bits_keeps_65535(tmp_path: Path, photo: np.ndarray) -> None:
    image = written(tmp_path / "full.tif", photo.astype(np.uint16) * 257)
    assert image.white == 65535 and image.note == "" and image.depth_text == "16-bit"


def test_a_dim_frame_of_a_12_bit_camera_is_read_as_the_cameras_other_frames(tmp_path: Path) -> None:
    dim = written(tmp_path / "dim.tif", np.arange(1000, dtype=np.uint16).reshape(20, 50))  # largest 999
    assert dim.white == 4095  # not 1023: 8 and 10 bits are no step, so a dark frame is not brightened 4x


def test_the_white_a_tiff_declares_is_used_and_an_alpha_channel_does_not_count(tmp_path: Path) -> None:
    pixels = np.full((20, 30, 4), 3000, np.uint16)
    pixels[..., 3] = 65535  # opaque alpha at the top of 16 bits
    tifffile.imwrite(tmp_path / "rgba.tif", pixels, extrasamples=[2])
    assert read_image(tmp_path / "rgba.tif").white == 4095
    tifffile.imwrite(tmp_path / "declared.tif", pixels[..., 0], extratags=[(281, "H", 1, 16383, False)])
    declared = read_image(tmp_path / "declared.tif")
    assert declared.white == 16383 and declared.note == "16383 is white, as the file's MaxSampleValue says"


def test_a_constant_integer_image_out_of_16_bits_reads_as_0(tmp_path: Path) -> None:
    image = written(tmp_path / "flat.tif", np.full((10, 12), 70000, np.int32))
    assert image.pixels.max() == 0 and image.note == "every value 70000: read as 0" and image.white == 0


def test_a_float_image_with_a_hot_pixel_is_read_as_0_to_1_and_the_pixel_clipped(
        tmp_path: Path, photo: np.ndarray, segmenter: Segmenter) -> None:
    values = photo.astype(np.float32) / 255
    values[0, 0] = 1000.0  # one pixel, three values
    values[1, 1] = np.nan
    values[2, 2] = np.inf
    image = written(tmp_path / "hot.tif", values)
    assert image.depth_text == "float32" and image.pixels.dtype == np.uint16
    assert "values 0..1000 read as 0..1, 3 values clipped" in image.note, image.note
    assert "6 values not finite (NaN or infinity) read as 0" in image.note
    assert agreement(segmenter, image, photo) > 0.99


@pytest.mark.parametrize("scale, said", [(255.0, "read as 0..255"), (40000.0, "stretched from")])
def test_a_float_image_on_another_scale_is_read_on_it(tmp_path: Path, photo: np.ndarray, segmenter: Segmenter,
                                                       scale: float, said: str) -> None:
    image = written(tmp_path / "scaled.tif", photo.astype(np.float64) / 255 * scale)
    assert image.depth_text == "float64" and said in image.note, image.note
    assert agreement(segmenter, image, photo) > 0.95  # a stretch changes the contrast a little


def test_other_integers_in_16_bits_follow_the_16_bit_rules_and_wider_ones_are_stretched(tmp_path: Path) -> None:
    twelve = written(tmp_path / "int32.tif", np.arange(4096, dtype=np.int32).reshape(64, 64))
    assert twelve.white == 4095 and twelve.depth_text == "int32"
    wide = written(tmp_path / "wide.tif", np.arange(-100, 4000 - 100, dtype=np.int32).reshape(40, 100) * 50)
    assert "values -5000..194950 stretched to 0..65535" in wide.note
    assert wide.pixels.min() == 0 and wide.pixels.max() == 65535


def test_a_large_mapped_tiff_of_12_bit_values_is_segmented_as_its_8_bit_picture(
        tmp_path: Path, photo: np.ndarray, segmenter: Segmenter) -> None:
    deep = (photo.astype(np.uint32) * 4095 // 255).astype(np.uint16)
    tifffile.imwrite(tmp_path / "big.tif", deep)
    assert isinstance(mappable_tiff(tmp_path / "big.tif"), MappedTiff)
    events: list[str] = []
    segment_large_tiff(tmp_path / "big.tif", tmp_path / "labels.tif", segmenter,
                       on_event=lambda event: events.append(event.message))
    assert "big.tif: 12-bit values (largest 4095): 4095 is white" in events
    labels = tifffile.imread(tmp_path / "labels.tif")
    assert (labels == segmenter.segment(ImageData(photo)).labels).mean() > 0.99
    tifffile.imwrite(tmp_path / "big8.tif", photo)  # 8-bit: nothing to say
    events.clear()
    segment_large_tiff(tmp_path / "big8.tif", tmp_path / "labels8.tif", segmenter,
                       on_event=lambda event: events.append(event.message))
    assert not [message for message in events if "white" in message], events


def test_a_two_channel_tiff_is_refused_saying_what_to_save_instead(tmp_path: Path) -> None:
    tifffile.imwrite(tmp_path / "cells.tif", np.zeros((2, 36, 48), np.uint16), photometric="minisblack",
                     planarconfig="separate")  # one page of two samples a pixel, as microscopes write
    with pytest.raises(ImageReadError) as refused:
        read_image(tmp_path / "cells.tif")
    assert str(refused.value) == (f"{tmp_path / 'cells.tif'}: unsupported pixel layout (2, 36, 48); expected HxW, "
                                  "HxWx3 or HxWx4: 2 channels; save the one to segment, or an RGB composite of "
                                  "them, as its own image")


def test_training_reads_a_12_bit_image_on_the_scale_inference_does(tmp_path: Path, photo: np.ndarray) -> None:
    """A model trained on a camera's 12-bit frames sees them at inference as it saw them in training."""
    from leanseg.core.train.dataset import CAMVID_SPEC, PairCache, load_spec

    deep = (photo.astype(np.uint32) * 4095 // 255).astype(np.uint16)
    tifffile.imwrite(tmp_path / "frame.tif", deep)
    label = tmp_path / "frame_label.png"
    cv2.imwrite(str(label), np.zeros(photo.shape[:2], np.uint8))
    trained_on = PairCache([(tmp_path / "frame.tif", label)], load_spec(CAMVID_SPEC)).images[0]
    assert np.abs(trained_on.astype(int) - photo.astype(int)).max() <= 1  # not the display's percentile stretch
