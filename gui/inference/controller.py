"""The GUI thread's handle on the inference worker: starts its thread, sends requests, tracks the current job."""
from __future__ import annotations

import itertools
from pathlib import Path

from PySide6.QtCore import QObject, QThread, Signal

from leanseg.core.io.images import ImageData
from leanseg.core.predict import InferenceOptions

from .latency import configure_process
from .worker import InferenceJob, InferenceWorker


class InferenceController(QObject):
    """Requests go out as queued signals; the worker's signals (`self.worker.*`) come back on the GUI thread.

    One job is current at a time: submitting a new one cancels the previous one, whose late signals the
    window ignores by checking `is_current(job_id)`.
    """

    _configure_requested = Signal(object, object)  # model path or None, InferenceOptions
    _job_requested = Signal(object)  # InferenceJob

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.worker_thread = QThread()
        self.worker_thread.setObjectName("leanseg-inference")
        self.worker = InferenceWorker()
        self.worker.moveToThread(self.worker_thread)
        self._configure_requested.connect(self.worker.configure)
        self._job_requested.connect(self.worker.run_job)
        configure_process()
        self._ids = itertools.count(1)
        self.current: InferenceJob | None = None
        self.worker_thread.start()

    def configure(self, model_path: Path | None, options: InferenceOptions) -> None:
        """Load a model and/or move it to the options' device; answered by model_ready or model_failed."""
        self._configure_requested.emit(model_path, options)

    def submit(self, *, path: Path | None = None, image: ImageData | None = None, segment: bool = True) -> int:
        """Cancel the current job and queue a new one; returns its id."""
        self.cancel()
        job = InferenceJob(next(self._ids), path=path, image=image, segment=segment)
        self.current = job
        self._job_requested.emit(job)
        return job.job_id

    def cancel(self) -> None:
        """Ask the current job to stop at its next check (between tiles); returns at once."""
        if self.current is not None:
            self.current.cancel.set()

    def is_current(self, job_id: int) -> bool:
        return self.current is not None and self.current.job_id == job_id and not self.current.cancel.is_set()

    def shutdown(self) -> None:
        """Cancel, then let the thread finish its current step and stop (never terminate())."""
        self.cancel()
        self.worker_thread.quit()
        self.worker_thread.wait()
