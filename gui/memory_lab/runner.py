"""The memory lab's worker: `run_lab` on a Python thread, its events turned into queued Qt signals."""
from __future__ import annotations

import threading

from PySide6.QtCore import QObject, Signal

from leanseg.core.events import JobCancelled
from leanseg.core.profile import LabRequest, run_lab


class LabRunner(QObject):
    """Runs `run_lab` on a Python thread; its events come back as queued signals on the GUI thread."""

    job_event = Signal(object)  # JobEvent (named so it does not hide QObject.event)
    finished = Signal(object)  # LabResult
    failed = Signal(str)
    cancelled = Signal()

    def __init__(self) -> None:
        super().__init__()
        self._cancel = threading.Event()
        self._thread: threading.Thread | None = None

    def busy(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, request: LabRequest) -> None:
        if self.busy():
            raise RuntimeError("the memory lab is already running")
        self._cancel = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(request, self._cancel), name="memory-lab",
                                        daemon=True)
        self._thread.start()

    def cancel(self) -> None:
        self._cancel.set()

    def wait(self, seconds: float) -> None:
        if self._thread is not None:
            self._thread.join(seconds)

    def _run(self, request: LabRequest, cancel: threading.Event) -> None:
        try:
            result = run_lab(request, cancel=cancel, on_event=self.job_event.emit)
        except JobCancelled:
            self.cancelled.emit()
        except Exception as err:  # reported in the window, never raised on a worker thread
            self.failed.emit(f"{type(err).__name__}: {err}")
        else:
            self.finished.emit(result)
