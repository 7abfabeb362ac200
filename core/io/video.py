"""Read videos with OpenCV (FFmpeg) on a thread through a bounded prefetch queue.

    with VideoReader(path) as reader:          # opens and decodes the first frame, or VideoReadError
        for frame in reader:                   # VideoFrame(index, rgb (H, W, 3) uint8, seconds)
            ...
        reader.stop_note                       # "" or where a damaged/truncated file stopped

The decoding thread stays at most `prefetch` frames ahead, so memory is flat however long the
video is. Writing lives in `video_writer.py`.
"""
from __future__ import annotations

import os
import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from .video_probe import VIDEO_SUFFIXES, VideoReadError, check_video_file, explain_unopenable

# FFmpeg's decoder messages on a damaged file ('[mpeg4 @ 0x...] ac-tex damaged at 7 5') go to stderr unasked, before
# leanseg's own line saying where the video stopped: quiet unless the user set a level (read at the first open)
os.environ.setdefault("OPENCV_FFMPEG_LOGLEVEL", "-8")

__all__ = ["VIDEO_SUFFIXES", "VideoFrame", "VideoInfo", "VideoReadError", "VideoReader", "VideoSeeker", "probe_video"]


@dataclass(frozen=True)
class VideoInfo:
    path: Path
    container: str  # 'mp4', 'avi', 'mkv', ... from the file's signature
    width: int  # pixels
    height: int  # pixels
    fps: float | None  # frames per second, None when the container does not say
    frame_count: int | None  # frames the container announces, None when it does not know

    @property
    def duration_s(self) -> float | None:
        if self.fps is None or self.frame_count is None:
            return None
        return self.frame_count / self.fps

    def describe(self) -> str:
        """'480x360, 101 frames at 15.00 fps (6.7 s)'."""
        count = f"{self.frame_count} frames" if self.frame_count is not None else "unknown frame count"
        rate = f" at {self.fps:.2f} fps" if self.fps is not None else ""
        length = f" ({self.duration_s:.1f} s)" if self.duration_s is not None else ""
        return f"{self.width}x{self.height}, {count}{rate}{length}"


@dataclass(frozen=True)
class VideoFrame:
    index: int  # 0-based frame number in the file
    rgb: np.ndarray  # (H, W, 3) uint8, RGB order
    seconds: float  # presentation time, index / fps (0 when fps is unknown)


def _open_capture(path: Path, kind: str) -> tuple[cv2.VideoCapture, VideoInfo]:
    capture = cv2.VideoCapture(str(path), cv2.CAP_FFMPEG)
    if not capture.isOpened():
        capture.release()
        raise VideoReadError(path, explain_unopenable(path, kind))
    fps = float(capture.get(cv2.CAP_PROP_FPS))
    count = capture.get(cv2.CAP_PROP_FRAME_COUNT)
    info = VideoInfo(
        path=path,
        container=kind,
        width=int(capture.get(cv2.CAP_PROP_FRAME_WIDTH)),
        height=int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT)),
        fps=fps if 0.0 < fps < 1000.0 else None,
        frame_count=int(count) if 0 < count < 1e9 else (0 if count == 0 else None),
    )
    if info.frame_count == 0:
        capture.release()
        raise VideoReadError(path, f"contains no frames (the {kind.upper()} container announces 0)")
    return capture, info


def probe_video(path: str | Path) -> VideoInfo:
    """Size, fps and frame count of a video; VideoReadError if it cannot be read or has no frames."""
    with VideoReader(path, prefetch=1) as reader:
        return reader.info


_END = object()


class VideoReader:
    """Frames of one video, decoded on a background thread at most `prefetch` frames ahead."""

    def __init__(self, path: str | Path, *, start: int = 0, every: int = 1, prefetch: int = 4) -> None:
        if every < 1:
            raise ValueError(f"every must be >= 1 (1 = every frame), got {every}")
        if prefetch < 1:
            raise ValueError(f"prefetch must be >= 1, got {prefetch}")
        if start < 0:
            raise ValueError(f"start must be a frame index >= 0, got {start}")
        self.path = Path(path)
        kind = check_video_file(self.path)
        self._capture, self.info = _open_capture(self.path, kind)
        self.every = every
        self.start = start
        self.stop_note = ""  # set when the file ends before the frame count it announced
        self.stopped_at: int | None = None  # first frame index that could not be decoded, if damaged
        self._queue: queue.Queue[object] = queue.Queue(maxsize=prefetch)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        try:
            if start:
                self._capture.set(cv2.CAP_PROP_POS_FRAMES, start)
            ok, first = self._capture.read()
        except cv2.error as err:
            ok, first = False, None
            self._capture.release()
            raise VideoReadError(self.path, f"could not decode frame {start}: {err}") from err
        if not ok or first is None:
            self._capture.release()
            where = "contains no decodable frames" if start == 0 else f"has no frame {start}"
            raise VideoReadError(self.path, where)
        self._first: np.ndarray | None = first

    @property
    def frames_to_read(self) -> int | None:
        """How many frames iteration will yield if the file is intact (start and `every` applied)."""
        if self.info.frame_count is None:
            return None
        remaining = max(self.info.frame_count - self.start, 0)
        return (remaining + self.every - 1) // self.every

    def __iter__(self) -> Iterator[VideoFrame]:
        if self._thread is not None:
            raise RuntimeError("a VideoReader can be iterated once; open another to read again")
        self._thread = threading.Thread(target=self._decode, name=f"video-reader:{self.path.name}", daemon=True)
        self._thread.start()
        while True:
            item = self._queue.get()
            if item is _END:
                return
            assert isinstance(item, VideoFrame)
            yield item

    def _put(self, item: object) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _decode(self) -> None:
        fps = self.info.fps or 0.0
        index = self.start
        bgr, self._first = self._first, None
        try:
            while bgr is not None and not self._stop.is_set():
                rgb = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
                if not self._put(VideoFrame(index, rgb, index / fps if fps else 0.0)):
                    return
                bgr = self._next_frame(index)
                index += self.every
            if not self._stop.is_set():
                self._note_early_stop(index)
        except Exception as err:  # a decoder failure mid-file: stop there and say so
            self._note_early_stop(index, f" ({type(err).__name__}: {err})")
        finally:
            self._capture.release()
            self._put(_END)

    def _next_frame(self, index: int) -> np.ndarray | None:
        for _ in range(self.every - 1):  # skipped frames: demux and decode, no colour conversion
            if not self._capture.grab():
                return None
        ok, bgr = self._capture.read()
        return bgr if ok else None

    def _note_early_stop(self, index: int, detail: str = "") -> None:
        count = self.info.frame_count
        if count is None or index >= count:
            return
        self.stopped_at = index
        self.stop_note = (f"{self.path}: stopped at frame {index} of {count}: the file is truncated or damaged "
                          f"there{detail}; the frames before it were read")

    def close(self) -> None:
        """Stop the decoding thread and release the file; safe to call twice."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        elif self._first is not None:
            self._capture.release()
            self._first = None

    def __enter__(self) -> VideoReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class VideoSeeker:
    """Frames by index for a player: forward steps decode in order, other jumps seek. One thread only."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        kind = check_video_file(self.path)
        self._capture, self.info = _open_capture(self.path, kind)
        self._next_index = 0  # the frame the capture decodes next

    def read(self, index: int, *, max_skip: int = 30) -> VideoFrame | None:
        """Frame `index` as RGB, or None past the end (or where the file is damaged).

        Up to `max_skip` frames ahead are skipped by decoding (grab), further jumps seek.
        """
        if index < 0:
            raise ValueError(f"frame index must be >= 0, got {index}")
        if not self._next_index <= index <= self._next_index + max_skip:
            self._capture.set(cv2.CAP_PROP_POS_FRAMES, index)
            self._next_index = index
        while self._next_index < index:
            if not self._capture.grab():
                return None
            self._next_index += 1
        ok, bgr = self._capture.read()
        if not ok or bgr is None:
            return None
        self._next_index = index + 1
        fps = self.info.fps or 0.0
        return VideoFrame(index, cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB), index / fps if fps else 0.0)

    def close(self) -> None:
        self._capture.release()

    def __enter__(self) -> VideoSeeker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
