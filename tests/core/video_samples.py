"""Small synthetic videos for the video tests: each frame's brightness encodes its index."""
from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

WIDTH, HEIGHT = 64, 48


def frame_pixels(index: int, width: int = WIDTH, height: int = HEIGHT) -> np.ndarray:
    """(H, W, 3) uint8 RGB: flat grey at 20 * index (mod 240) with a textured band (so codecs work)."""
    rng = np.random.default_rng(index)
    pixels = np.full((height, width, 3), (20 * index) % 240, np.uint8)
    pixels[: height // 4] = rng.integers(0, 255, (height // 4, width, 3), dtype=np.uint8)
    return pixels


def write_video(path: Path, frames: int, fps: float = 10.0, fourcc: str = "mp4v",
                width: int = WIDTH, height: int = HEIGHT) -> Path:
    """A real video file written with OpenCV directly (not through the code under test)."""
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*fourcc), fps, (width, height))
    assert writer.isOpened(), f"cannot write {path} with {fourcc}"
    for index in range(frames):
        writer.write(cv2.cvtColor(frame_pixels(index, width, height), cv2.COLOR_RGB2BGR))
    writer.release()
    return path


def truncate(path: Path, out: Path, fraction: float) -> Path:
    """Copy the first `fraction` of a file's bytes, as an interrupted copy or download leaves it."""
    data = path.read_bytes()
    out.write_bytes(data[: int(len(data) * fraction)])
    return out


def count_frames(path: Path) -> tuple[int, float, tuple[int, int]]:
    """(frames decoded, fps, (width, height)) using OpenCV directly."""
    capture = cv2.VideoCapture(str(path))
    assert capture.isOpened(), f"{path} does not open"
    frames = 0
    while capture.read()[0]:
        frames += 1
    size = (int(capture.get(cv2.CAP_PROP_FRAME_WIDTH)), int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT)))
    fps = float(capture.get(cv2.CAP_PROP_FPS))
    capture.release()
    return frames, fps, size


def grey_level(rgb: np.ndarray) -> float:
    """Mean of the flat (lower) part of a frame, which encodes the frame index."""
    return float(rgb[rgb.shape[0] // 2 :].mean())
