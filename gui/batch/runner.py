"""Runs `run_batch` on its own QThread for the batch dialog; events come back as queued signals.

The runner keeps its own Segmenter (loaded from the model file the main window uses), so a batch
never blocks the viewer's worker. Cancel is the job's threading.Event, set from the GUI thread.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import QObject, QThread, Signal, Slot

from leanseg.core.jobs.batch import run_batch
from leanseg.core.jobs.batch_plan import BatchSettings
from leanseg.core.jobs.manifest import ManifestError
from leanseg.core.model.checkpoint import CheckpointError
from leanseg.core.model.sources import load_model
from leanseg.core.predict import InferenceOptions, Segmenter


@dataclass(frozen=True)
class BatchRequest:
    settings: BatchSettings
    model_path: Path
    options: InferenceOptions
    cancel: threading.Event = field(default_factory=threading.Event)


class BatchRunner(QObject):
    """Lives on its own thread; `run` blocks that thread for the whole batch."""

    job_event = Signal(object)  # JobEvent, from the batch's threads (queued to the GUI)
    finished = Signal(object)  # BatchSummary (cancelled or not)
    failed = Signal(str)  # the batch could not start or stopped on an error, with the reason

    def __init__(self) -> None:
        super().__init__()
        self._segmenter: Segmenter | None = None
        self._key: tuple[Path, InferenceOptions] | None = None

    @Slot(object)
    def run(self, request: BatchRequest) -> None:
        try:
            segmenter = self._segmenter_for(request.model_path, request.options)
            summary = run_batch(request.settings, segmenter, cancel=request.cancel, on_event=self.job_event.emit)
        except (CheckpointError, ManifestError, ValueError, OSError) as err:
            self.failed.emit(str(err))
            return
        except Exception as err:  # noqa: BLE001 - the dialog must hear about anything, not hang
            self.failed.emit(f"The batch stopped ({type(err).__name__}): {err}")
            return
        self.finished.emit(summary)

    def _segmenter_for(self, model_path: Path, options: InferenceOptions) -> Segmenter:
        key = (Path(model_path), options)
        if self._segmenter is None or self._key != key:
            self._segmenter = Segmenter(load_model(model_path), options)
            self._key = key
        return self._segmenter


class BatchThread(QObject):
    """Owns the runner's QThread; `start(request)` queues a batch, `stop()` cancels and joins."""

    _run_requested = Signal(object)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.runner_thread = QThread()
        self.runner_thread.setObjectName("leanseg-batch")
        self.runner = BatchRunner()
        self.runner.moveToThread(self.runner_thread)
        self._run_requested.connect(self.runner.run)
        self.current: BatchRequest | None = None
        self.runner_thread.start()

    def start(self, request: BatchRequest) -> None:
        self.current = request
        self._run_requested.emit(request)

    def cancel(self) -> None:
        if self.current is not None:
            self.current.cancel.set()

    def stop(self) -> None:
        """Cancel the batch (it stops at the next tile or image) and end the thread; never terminate()."""
        self.cancel()
        self.runner_thread.quit()
        self.runner_thread.wait()
