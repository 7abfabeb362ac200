"""Export a segmented video from the GUI: the CLI's `segment_video` job on its own thread.

The export loads its own Segmenter, so live playback and export never share one. Events come back
as queued signals; cancel is the job's threading.Event. The job finalises the file on cancel and
on error, so what was exported stays playable.
"""
from __future__ import annotations

import threading
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from leanseg.core.events import JobEvent
from leanseg.core.io.video import VideoReadError
from leanseg.core.io.video_writer import VideoWriteError
from leanseg.core.jobs import VideoJobOptions, segment_video
from leanseg.core.model.checkpoint import CheckpointError
from leanseg.core.model.sources import load_model
from leanseg.core.predict import InferenceOptions, Segmenter


class VideoExport(QObject):
    """One export at a time: `start(...)`, then `job_event`s, then exactly one of `finished` / `failed`."""

    job_event = Signal(object)  # JobEvent from the job (start, frame k of n with fps, warning, cancelled, done)
    finished = Signal(object)  # VideoJobSummary, also after cancel
    failed = Signal(str)  # could not start, or stopped on an error; the message names the file

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.cancel_event = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, source: Path, output: Path, model_path: Path, options: InferenceOptions,
              job_options: VideoJobOptions) -> None:
        if self.running:
            raise RuntimeError("an export is already running")
        self.cancel_event = threading.Event()
        self._thread = threading.Thread(target=self._run, name="video-export", daemon=True,
                                        args=(source, output, model_path, options, job_options, self.cancel_event))
        self._thread.start()

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
             job_options: VideoJobOptions, cancel: threading.Event) -> None:
        def on_event(event: JobEvent) -> None:
            self.job_event.emit(event)

        try:
            segmenter = Segmenter(load_model(model_path), options)
            summary = segment_video(source, output, segmenter, job_options, cancel=cancel, on_event=on_event)
        except (VideoReadError, VideoWriteError, CheckpointError, ValueError) as err:
            self.failed.emit(str(err))
            return
        except Exception as err:  # noqa: BLE001 - the panel must hear about anything, not hang
            self.failed.emit(f"The export stopped ({type(err).__name__}): {err}; {output} holds what was written")
            return
        self.finished.emit(summary)
