"""The back end of the video job: overlay, encode, label PNGs and CSV rows on their own thread.

Inference runs on the job's thread; this sink takes (frame, labels) pairs through a bounded
queue, so drawing and encoding frame k overlap inference on frame k+1. `close()` always
finalises the video and the CSV (also after cancel or an error), so what was written is usable.
"""
from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ..io.output_names import frame_labels_name
from ..io.outputs import make_folder, overlay, write_png
from ..io.video import VideoFrame
from ..io.video_writer import VideoWriter

_END = object()


class ClassFractionsCsv:
    """A plain CSV, `frame_index,time_s,fraction <class>...`: per-frame pixel shares, renamed into place on close."""

    def __init__(self, path: Path, class_names: Sequence[str]) -> None:
        self.path = path
        self.num_classes = len(class_names)
        make_folder(path.parent)
        self.partial_path = path.with_name(f".{path.name}.partial")
        self._handle = self.partial_path.open("w", encoding="utf-8", newline="")
        header = ["frame_index", "time_s", *(_csv_field(f"fraction {name}") for name in class_names)]
        self._handle.write(",".join(header) + "\n")
        self.rows = 0

    def add(self, frame_index: int, seconds: float, labels: np.ndarray) -> None:
        """One row for (H, W) uint8 labels; fractions of all pixels, summing to 1 over known classes."""
        counts = np.bincount(labels.ravel(), minlength=self.num_classes)[: self.num_classes]
        fractions = counts / float(labels.size)
        self._handle.write(f"{frame_index},{seconds:.4f}," + ",".join(f"{f:.5f}" for f in fractions) + "\n")
        self.rows += 1

    def close(self) -> Path:
        if not self._handle.closed:
            self._handle.close()
            os.replace(self.partial_path, self.path)
        return self.path


def _csv_field(text: str) -> str:
    return f'"{text.replace(chr(34), chr(34) * 2)}"' if any(c in text for c in ',"\n') else text


class SegmentedFrameSink:
    """Consumes (VideoFrame, labels (H, W) uint8) on a thread: overlay -> video (unless `writer` is None),
    optional PNG and CSV row."""

    def __init__(
        self,
        writer: VideoWriter | None,
        colours: Sequence[Sequence[int]],
        *,
        alpha: float,
        labels_dir: Path | None,
        labels_stem: str,
        csv: ClassFractionsCsv | None,
        queue_size: int,
        claim: Callable[[Path], None] | None = None,  # told each label PNG's path before it is written
    ) -> None:
        self.writer = writer
        self.colours = colours
        self.alpha = alpha
        self.labels_dir = labels_dir
        self.labels_stem = labels_stem
        self.csv = csv
        self.claim = claim
        self.error: BaseException | None = None
        self.label_files = 0
        if labels_dir is not None:
            make_folder(labels_dir)
        self._queue: queue.Queue[object] = queue.Queue(maxsize=queue_size)
        self._thread = threading.Thread(target=self._drain, name="video-writer", daemon=True)
        self._thread.start()

    def put(self, frame: VideoFrame, labels: np.ndarray) -> None:
        """Queue one segmented frame (blocks while the queue is full); re-raises a writer failure."""
        self.raise_error()
        while self._thread.is_alive():
            try:
                self._queue.put((frame, labels), timeout=0.1)
                return
            except queue.Full:
                continue
        self.raise_error()

    def raise_error(self) -> None:
        if self.error is not None:
            raise self.error

    def _drain(self) -> None:
        while True:
            item = self._queue.get()
            if item is _END:
                return
            if self.error is not None:
                continue  # after a failure, drop the rest until the end marker
            assert isinstance(item, tuple)
            try:
                self._write_one(*item)
            except BaseException as err:  # surfaced on the job's thread by put()/close()
                self.error = err

    def _write_one(self, frame: VideoFrame, labels: np.ndarray) -> None:
        if self.writer is not None:
            self.writer.write(overlay(frame.rgb, labels, self.colours, self.alpha))
        if self.labels_dir is not None:
            path = self.labels_dir / frame_labels_name(self.labels_stem, frame.index)
            if self.claim is not None:
                self.claim(path)
            write_png(path, labels)
            self.label_files += 1
        if self.csv is not None:
            self.csv.add(frame.index, frame.seconds, labels)

    def close(self) -> Path | None:
        """Write what is queued, finalise video and CSV; the video path (None if no frame). Re-raises failures."""
        self._queue.put(_END)
        self._thread.join()
        try:
            output = self.writer.close() if self.writer is not None else None
        finally:
            if self.csv is not None:
                self.csv.close()
        self.raise_error()
        return output
