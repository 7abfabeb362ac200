"""Export a segmented video from the GUI: the CLI's `segment_video` job on its own thread.

The export loads its own Segmenter, so live playback and export never share one. Events come back
as queued signals; cancel is the job's threading.Event. The job finalises the file on cancel and
on error, so what was exported stays playable. As in `leanseg video`, a VideoOutputGuard decides what it may
write: never the input video, and a file of the user's only when told to overwrite it.
"""
from __future__ import annotations

import threading
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from leanseg.core.events import JobEvent
from leanseg.core.io.video import VideoReadError
from leanseg.core.io.video_writer import VideoWriteError
from leanseg.core.jobs import VideoJobOptions, VideoJobSummary, segment_video
from leanseg.core.jobs.video_guard import VideoOutputGuard
from leanseg.core.model.checkpoint import CheckpointError
from leanseg.core.model.sources import load_model
from leanseg.core.predict import InferenceOptions, Segmenter


def export_csv_path(output: Path) -> Path:
    """The class-fraction CSV written beside an exported video: `output` with .csv."""
    return Path(output).with_suffix(".csv")


def export_guard(source: Path, output: Path, overwrite: bool) -> VideoOutputGuard:
    """The guard over what an export of `source` to `output` writes: the video and its class-fraction CSV."""
    files = [(Path(output), "the exported video"), (export_csv_path(output), "its class-fraction CSV")]
    return VideoOutputGuard(source, files, labels_dir=None, labels_stem="", overwrite=overwrite,
                            how_to_replace="export again and answer Yes to replace it")


def files_to_replace(source: Path, output: Path) -> list[Path]:
    """The user's files (no leanseg video run wrote them) that an export to `output` would replace.

    Raises VideoOutputRefused for what is refused even with overwrite: the input video, a folder."""
    guard = export_guard(source, output, overwrite=True)
    guard.check()
    return guard.foreign_files()


class VideoExport(QObject):
    """One export at a time: `start(...)`, then `job_event`s, then exactly one of `finished` / `failed`."""

    job_event = Signal(object)  # JobEvent from the job (start, frame k of n with fps, warning, cancelled, done)
    finished = Signal(object)  # VideoJobSummary, also after cancel
    failed = Signal(str)  # could not start, or stopped on an error; the message names the file

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.cancel_event = threading.Event()
        self._thread: threading.Thread | None = None
        self._busy = False  # from start() until just before finished/failed is emitted

    @property
    def running(self) -> bool:
        """An export is under way: false once its finished/failed is emitted, though its thread may still be
        returning, so the panel can start the next export as soon as it hears."""
        return self._busy

    def start(self, source: Path, output: Path, model_path: Path, options: InferenceOptions,
              job_options: VideoJobOptions, guard: VideoOutputGuard) -> None:
        """Export on a new thread; `guard` (already checked) notes each output before it is written and is
        closed when the export ends."""
        if self.running:
            raise RuntimeError("an export is already running")
        self._busy = True
        self.cancel_event = threading.Event()
        self._thread = threading.Thread(target=self._run, name="video-export", daemon=True,
                                        args=(source, output, model_path, options, job_options, guard,
                                              self.cancel_event))
        try:
            self._thread.start()
        except BaseException:
            self._busy = False
            raise

    def cancel(self) -> None:
        """Stop after the frame in hand; the file written so far is finalised."""
        self.cancel_event.set()

    def stop(self) -> None:
        """Cancel and wait for the job to finalise its file."""
        self.cancel()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self, source: Path, output: Path, model_path: Path, options: InferenceOptions,
             job_options: VideoJobOptions, guard: VideoOutputGuard, cancel: threading.Event) -> None:
        try:
            outcome = self._segment(source, output, model_path, options, job_options, guard, cancel)
        finally:
            guard.close()  # before the panel hears, so its next export reads the whole ledger
            self._busy = False
        if isinstance(outcome, VideoJobSummary):
            self.finished.emit(outcome)
        else:
            self.failed.emit(outcome)

    def _segment(self, source: Path, output: Path, model_path: Path, options: InferenceOptions,
                 job_options: VideoJobOptions, guard: VideoOutputGuard,
                 cancel: threading.Event) -> VideoJobSummary | str:
        """The job's summary, or the message saying why it stopped."""
        def on_event(event: JobEvent) -> None:
            self.job_event.emit(event)

        try:
            segmenter = Segmenter(load_model(model_path), options)
            return segment_video(source, output, segmenter, job_options, cancel=cancel, on_event=on_event,
                                 guard=guard)
        except (VideoReadError, VideoWriteError, CheckpointError, ValueError) as err:
            return str(err)
        except Exception as err:  # noqa: BLE001 - the panel must hear about anything, not hang
            return f"The export stopped ({type(err).__name__}): {err}; {output} holds what was written"
