"""Live video playback with the overlay segmented on a worker thread, paced to the video's frame rate.

The worker thread owns the decoder (VideoSeeker) and its own Segmenter. While playing, the frame
due at the current wall-clock time is the one decoded and segmented next: when inference is slower
than the video, the frames in between are skipped, so the picture keeps real time. Commands (play,
pause, seek, model) come from the GUI thread through a lock-protected state; frames go back as a
queued signal, at most two in flight, so a busy GUI never makes frames pile up in memory.
"""
from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PySide6.QtCore import QObject, Signal

from leanseg.core.io.images import ImageData
from leanseg.core.io.video import VideoInfo, VideoSeeker
from leanseg.core.model.checkpoint import CheckpointError
from leanseg.core.model.sources import load_model
from leanseg.core.predict import InferenceOptions, Segmenter

MAX_FRAMES_IN_FLIGHT = 2  # frames emitted but not yet drawn by the GUI


@dataclass(frozen=True)
class ShownFrame:
    index: int  # frame number in the file
    rgb: np.ndarray  # (H, W, 3) uint8
    labels: np.ndarray | None  # (H, W) uint8, None without a model or with the overlay off
    fps: float  # frames shown per second over the last second of playing (0 when paused)
    skipped: int  # frames skipped to keep up since play was pressed
    infer_seconds: float  # inference time of this frame (0 without labels)
    model_serial: int = 0  # which set_model call's model made `labels` (VideoPlayback.model_serial)


@dataclass
class _Commands:
    playing: bool = False
    seek_to: int | None = None  # a frame to show next, replacing any earlier request
    model: tuple[Path | None, InferenceOptions, int] | None = None  # a model to load next, and its serial
    segment: bool = True  # run inference on shown frames
    stop: bool = False


def load_failure(model_path: Path, err: Exception) -> str:
    """One line naming the model file and why it could not be used (a CheckpointError names the file itself)."""
    reason = str(err) if isinstance(err, CheckpointError) else f"{model_path}: {type(err).__name__}: {err}"
    return reason.splitlines()[0]


class VideoPlayback(QObject):
    """Open a video, then play/pause/seek from the GUI thread; `frame_shown` brings each frame back."""

    frame_shown = Signal(object)  # ShownFrame
    playing_changed = Signal(bool)
    ended = Signal()  # playing reached the last frame
    failed = Signal(str)  # a model or decoding problem, for the user
    model_loaded = Signal(str)  # the model's file name

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.info: VideoInfo | None = None
        self._seeker: VideoSeeker | None = None
        self._thread: threading.Thread | None = None
        self._commands = _Commands()
        self._wake = threading.Condition()
        self._in_flight = 0
        self.model_serial = 0  # counts models asked for: a frame whose serial is lower has an old model's labels

    # -- GUI thread -------------------------------------------------------------------------------------------
    def open(self, path: Path, model_path: Path | None, options: InferenceOptions) -> VideoInfo:
        """Open `path` (VideoReadError if it is not a readable video) and show its first frame."""
        seeker = VideoSeeker(path)
        self.close()
        self._seeker, self.info = seeker, seeker.info
        self.model_serial += 1
        self._commands = _Commands(seek_to=0, model=(model_path, options, self.model_serial))
        self._in_flight = 0
        self._thread = threading.Thread(target=self._run, name=f"video-player:{Path(path).name}", daemon=True)
        self._thread.start()
        return seeker.info

    def set_model(self, model_path: Path | None, options: InferenceOptions) -> None:
        """Segment with this model from the next frame on; frames made before carry the old `model_serial`."""
        self.model_serial += 1
        self._command(model=(model_path, options, self.model_serial))

    def set_segmenting(self, on: bool) -> None:
        self._command(segment=on)

    def play(self) -> None:
        self._command(playing=True)

    def pause(self) -> None:
        self._command(playing=False)

    def seek(self, index: int) -> None:
        """Show frame `index` next (clamped to the video); playing continues from there."""
        count = self.info.frame_count if self.info and self.info.frame_count else None
        index = max(0, index if count is None else min(index, count - 1))
        self._command(seek_to=index)

    def frame_drawn(self) -> None:
        """The GUI has drawn a frame: the worker may send another."""
        with self._wake:
            self._in_flight = max(0, self._in_flight - 1)
            self._wake.notify_all()

    @property
    def playing(self) -> bool:
        return self._commands.playing

    def close(self) -> None:
        """Stop the worker thread (it finishes the frame in hand) and release the file."""
        thread = self._thread
        if thread is not None:
            self._command(stop=True)
            thread.join()
            self._thread = None
        if self._seeker is not None:
            self._seeker.close()
            self._seeker = None

    def _command(self, **changes: object) -> None:
        with self._wake:
            was_playing = self._commands.playing
            for key, value in changes.items():
                setattr(self._commands, key, value)
            self._wake.notify_all()
        if "playing" in changes and changes["playing"] != was_playing:
            self.playing_changed.emit(bool(changes["playing"]))

    # -- worker thread ----------------------------------------------------------------------------------------
    def _run(self) -> None:
        seeker, info = self._seeker, self.info
        assert seeker is not None and info is not None
        fps = info.fps or 25.0
        segmenter: Segmenter | None = None
        serial = 0  # the serial of `segmenter`'s model
        shown_at: collections.deque[float] = collections.deque(maxlen=int(fps) + 1)
        last = -1  # index of the frame shown last
        clock: tuple[float, int] | None = None  # (wall time, frame index) that playing is paced from
        skipped = 0
        while True:
            with self._wake:
                commands = self._commands
                while not commands.stop and commands.seek_to is None and commands.model is None and (
                        not commands.playing or self._in_flight >= MAX_FRAMES_IN_FLIGHT):
                    self._wake.wait()
                if commands.stop:
                    return
                model, commands.model = commands.model, None
                seek_to, commands.seek_to = commands.seek_to, None
                playing, segment = commands.playing, commands.segment
            if model is not None:
                segmenter, serial = self._load(*model[:2]), model[2]
                if seek_to is None and last >= 0 and not playing:
                    seek_to = last  # redraw the paused frame with the new model
            if seek_to is None and not playing:
                continue
            if seek_to is not None:
                index, clock, skipped = seek_to, None, 0
            else:
                now = time.perf_counter()
                if clock is None:  # play pressed (again): from the next frame, or from the start at the end
                    at_end = info.frame_count is not None and last + 1 >= info.frame_count
                    last = -1 if at_end else last
                    clock, skipped = (now, last + 1), 0
                    shown_at.clear()
                due = clock[1] + int((now - clock[0]) * fps)
                index = max(last + 1, due)
                if info.frame_count is not None and index >= info.frame_count:
                    self._finish_playing()
                    clock = None
                    continue
                wait_s = clock[0] + (index - clock[1]) / fps - now
                if wait_s > 0:
                    with self._wake:
                        self._wake.wait(wait_s)  # a command wakes us early
                    continue
                skipped += index - last - 1
            frame = seeker.read(index)
            if frame is None:
                self._finish_playing()
                clock = None
                continue
            labels, seconds = self._segment(segmenter if segment else None, frame.rgb)
            last = index
            if playing and seek_to is None:
                shown_at.append(time.perf_counter())
            rate = (len(shown_at) - 1) / (shown_at[-1] - shown_at[0]) if len(shown_at) > 1 else 0.0
            with self._wake:
                self._in_flight += 1
            self.frame_shown.emit(ShownFrame(index, frame.rgb, labels, rate if playing else 0.0, skipped, seconds,
                                             serial))

    def _load(self, model_path: Path | None, options: InferenceOptions) -> Segmenter | None:
        if model_path is None:
            return None
        try:
            segmenter = Segmenter(load_model(model_path), options)
        except Exception as err:  # noqa: BLE001 - play on without an overlay, and say why
            self.failed.emit(f"Could not load the model for live segmentation: {load_failure(model_path, err)}")
            return None
        self.model_loaded.emit(Path(model_path).name)
        return segmenter

    def _segment(self, segmenter: Segmenter | None, rgb: np.ndarray) -> tuple[np.ndarray | None, float]:
        if segmenter is None:
            return None, 0.0
        try:
            result = segmenter.segment(ImageData(rgb))
        except Exception as err:  # noqa: BLE001 - keep playing; the overlay is what failed
            self.failed.emit(f"Live segmentation failed ({type(err).__name__}): {err}")
            self._command(segment=False)
            return None, 0.0
        return result.labels, result.seconds

    def _finish_playing(self) -> None:
        if self._commands.playing:
            self._command(playing=False)
            self.ended.emit()
