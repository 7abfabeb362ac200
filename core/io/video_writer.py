"""Write videos that are always finalised: a partial file is never left under the output name.

Frames go to a hidden sibling file; `close()` (run by `with`, also on cancel or error) finishes
the container (an MP4's index is written last) and renames it into place, so whatever was
written stays playable. A writer that got no frame leaves no file at all. Odd frame sizes: `.avi`
keeps them (OpenCV's own MJPEG writer); FFmpeg's codecs need even sizes, so other types get one
repeated column/row, and `padding_note` says so.
"""
from __future__ import annotations

import os
from pathlib import Path

import cv2
import numpy as np

from .outputs import make_folder

# Output suffix -> FourCC this OpenCV build can encode (pip wheels have no H.264 encoder).
WRITER_CODECS: dict[str, str] = {".mp4": "mp4v", ".m4v": "mp4v", ".mov": "mp4v", ".mkv": "mp4v", ".avi": "MJPG"}
# OpenCV's own MJPEG/AVI writer keeps any frame size; through FFmpeg, OpenCV rounds odd sizes down to even.
_OWN_WRITER = {".avi": cv2.CAP_OPENCV_MJPEG}


def encoded_size(suffix: str, width: int, height: int) -> tuple[int, int]:
    """The (width, height) a video of this type is encoded at: the frame's, or padded up to even for FFmpeg."""
    if suffix.lower() in _OWN_WRITER:
        return width, height
    return width + width % 2, height + height % 2


class VideoWriteError(Exception):
    """The output video cannot be written; the message names the file and the reason."""

    def __init__(self, path: str | Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = Path(path)
        self.reason = reason


class VideoWriter:
    """Append (H, W, 3) uint8 RGB frames of one size to a video file at a fixed frame rate."""

    def __init__(self, path: str | Path, fps: float, width: int, height: int) -> None:
        self.path = Path(path)
        codec = WRITER_CODECS.get(self.path.suffix.lower())
        if codec is None:
            raise VideoWriteError(self.path, f"unsupported output type {self.path.suffix!r}; use one of "
                                  f"{', '.join(WRITER_CODECS)}")
        if not 0.0 < fps <= 1000.0:
            raise VideoWriteError(self.path, f"frame rate must be in (0, 1000] fps, got {fps}")
        if width < 1 or height < 1:
            raise VideoWriteError(self.path, f"frame size must be positive, got {width}x{height}")
        if self.path.is_dir():
            raise VideoWriteError(self.path, "is a folder; give a file name such as out.mp4")
        make_folder(self.path.parent)
        self.partial_path = self.path.with_name(f".{self.path.stem}.partial{self.path.suffix}")
        self.fps = fps
        self.size = (width, height)  # of the frames given to write()
        self.encoded_size = encoded_size(self.path.suffix, width, height)  # of the frames in the file
        self.frames_written = 0
        backend = _OWN_WRITER.get(self.path.suffix.lower(), cv2.CAP_FFMPEG)
        self._writer: cv2.VideoWriter | None = cv2.VideoWriter(
            str(self.partial_path), backend, cv2.VideoWriter.fourcc(*codec), fps, self.encoded_size
        )
        if not self._writer.isOpened():
            self._writer = None
            self.partial_path.unlink(missing_ok=True)
            raise VideoWriteError(self.path, f"OpenCV/FFmpeg could not open a {codec} encoder for this file "
                                  "(is the folder writable?)")

    def write(self, rgb: np.ndarray) -> None:
        """Append one (H, W, 3) uint8 RGB frame of the size given at creation."""
        if self._writer is None:
            raise VideoWriteError(self.path, "write after close")
        width, height = self.size
        if rgb.shape != (height, width, 3) or rgb.dtype != np.uint8:
            raise VideoWriteError(self.path, f"frame {self.frames_written} is {rgb.shape} {rgb.dtype}; "
                                  f"expected ({height}, {width}, 3) uint8")
        pad_right, pad_bottom = self.encoded_size[0] - width, self.encoded_size[1] - height
        bgr = cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR)
        if pad_right or pad_bottom:  # the codec needs even sizes: repeat the last column / row
            bgr = cv2.copyMakeBorder(bgr, 0, pad_bottom, 0, pad_right, cv2.BORDER_REPLICATE)
        self._writer.write(bgr)
        self.frames_written += 1

    @property
    def padding_note(self) -> str:
        """'' when the file holds frames of the given size, else a sentence saying how they were padded."""
        if self.encoded_size == self.size:
            return ""
        (width, height), (out_w, out_h) = self.size, self.encoded_size
        return (f"{self.path.name} is {out_w}x{out_h}: this codec needs even sizes, so the {width}x{height} frames "
                "got their last column/row repeated (write .avi to keep the exact size)")

    def close(self) -> Path | None:
        """Finish the container and move it into place; the output path, or None if no frame was written."""
        if self._writer is None:
            return self.path if self.frames_written else None
        writer, self._writer = self._writer, None
        writer.release()
        if self.frames_written == 0:
            self.partial_path.unlink(missing_ok=True)
            return None
        os.replace(self.partial_path, self.path)
        return self.path

    def __enter__(self) -> VideoWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
