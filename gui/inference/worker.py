"""The inference worker: one long-lived QObject on its own thread that owns the model and the device.

The GUI thread never calls into it directly: it sends requests through queued signals (see inference.py) and
hears back through this object's signals, which Qt delivers on the GUI thread. Cancel is cooperative: each job
carries a threading.Event that the Segmenter checks between tiles; a job whose event is set reports `cancelled`.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from PySide6.QtCore import QObject, Signal, Slot

from leanseg.core.engine.frontends.ir import OutsideCapturedSizes
from leanseg.core.engine.tile_plan import BudgetTooSmallError
from leanseg.core.events import JobCancelled, JobEvent
from leanseg.core.io.images import ImageData, ImageReadError, read_image
from leanseg.core.memory import format_bytes
from leanseg.core.model.checkpoint import CheckpointError, LoadedModel, ModelInfo
from leanseg.core.model.sources import load_model
from leanseg.core.predict import InferenceOptions, Segmenter

WARM_UP_IMAGE = ImageData(np.zeros((64, 64, 3), np.uint8))  # a small image run once after each (re)configure


NO_MODEL_MESSAGE = "No model is loaded: open a model file first (File > Open model)."
IMAGE_UNREADABLE = "Could not open the image"  # how a job that failed reading its file begins its message


@dataclass(frozen=True)
class InferenceJob:
    """One request: read `path` (or take `image`), show it, and segment it unless `segment` is False."""

    job_id: int
    cancel: threading.Event = field(default_factory=threading.Event)
    path: Path | None = None  # an image file to read on the worker thread...
    image: ImageData | None = None  # ...or pixels already in memory
    segment: bool = True

    def __post_init__(self) -> None:
        if (self.path is None) == (self.image is None):
            raise ValueError("an InferenceJob needs exactly one of path and image")


@dataclass(frozen=True)
class ModelStatus:
    """What the worker holds after `configure`: the model file, its metadata, the device and options."""

    path: Path | None
    info: ModelInfo
    device: str
    options: InferenceOptions


def kept_note(model_name: str) -> str:
    """What a refused model's message ends with while the model `model_name` stays loaded."""
    return f"(still using {model_name})"


def is_out_of_memory(err: BaseException) -> bool:
    """True for CUDA/CPU allocation failures, which the worker recovers from instead of failing hard."""
    if isinstance(err, (torch.OutOfMemoryError, MemoryError)):
        return True
    text = str(err).lower()
    return isinstance(err, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text)


class InferenceWorker(QObject):
    """Owns the LoadedModel and the Segmenter; every slot runs on the worker thread."""

    model_ready = Signal(object)  # ModelStatus
    model_failed = Signal(str)  # why the model or options could not be used
    image_ready = Signal(int, object)  # job id, ImageData read from the job's path
    job_event = Signal(int, object)  # job id, JobEvent (start, plan, tile, done ...)
    job_finished = Signal(int, object)  # job id, Segmentation
    job_failed = Signal(int, str)  # job id, a message for the user
    job_cancelled = Signal(int)  # job id

    def __init__(self) -> None:
        super().__init__()
        self._loaded: LoadedModel | None = None
        self._segmenter: Segmenter | None = None

    @Slot(object, object)
    def configure(self, model_path: Path | None, options: InferenceOptions) -> None:
        """Load `model_path` (any format `sources.load_model` opens; given again, it is reloaded, e.g. after its
        card was edited; None keeps the current model) and place it on the options' device."""
        loaded = self._loaded
        try:
            if model_path is not None:
                loaded = load_model(model_path)
            if loaded is None:
                return
            segmenter = Segmenter(loaded, options)
            segmenter.segment(WARM_UP_IMAGE)  # first-call imports and kernel set-up happen now, not mid-job
        except CheckpointError as err:
            kept = f" {kept_note(self._loaded.path.name)}" if self._loaded and self._loaded.path else ""
            self.model_failed.emit(f"Could not open the model: {err}{kept}")
            return
        except (ValueError, RuntimeError) as err:
            self.model_failed.emit(f"Could not use these settings: {err}")
            return
        self._loaded, self._segmenter = loaded, segmenter
        self.model_ready.emit(ModelStatus(loaded.path, loaded.info, str(segmenter.device), options))

    @Slot(object)
    def run_job(self, job: InferenceJob) -> None:
        """Read, then segment; every outcome ends in exactly one of finished / failed / cancelled."""
        if job.cancel.is_set():
            self.job_cancelled.emit(job.job_id)
            return
        image = job.image
        if image is None:
            try:
                image = read_image(job.path)  # type: ignore[arg-type]
            except ImageReadError as err:
                self.job_failed.emit(job.job_id, f"{IMAGE_UNREADABLE}: {err}")
                return
            except OSError as err:
                self.job_failed.emit(job.job_id, f"{IMAGE_UNREADABLE} {job.path}: {err}")
                return
            self.image_ready.emit(job.job_id, image)
        if not job.segment:
            return
        if self._segmenter is None:
            self.job_failed.emit(job.job_id, NO_MODEL_MESSAGE)
            return
        self._segment(job, image, self._segmenter)

    def _segment(self, job: InferenceJob, image: ImageData, segmenter: Segmenter) -> None:
        def sink(event: JobEvent) -> None:
            self.job_event.emit(job.job_id, event)

        sink(JobEvent("start", f"segmenting {image.width}x{image.height} on {segmenter.device}"))
        try:
            result = segmenter.segment(image, cancel=job.cancel, on_event=sink)
        except JobCancelled:
            result = None
        except Exception as err:  # noqa: BLE001 - the worker must survive anything a model throws
            message = self._explain(err, image, segmenter)
            sink(JobEvent("error", message))  # the job's end, as 'done' and 'cancelled' mark theirs
            self.job_failed.emit(job.job_id, message)
            return
        if result is None or job.cancel.is_set():
            sink(JobEvent("cancelled", "cancelled"))
            self.job_cancelled.emit(job.job_id)
            return
        sink(JobEvent("done", f"done in {result.seconds:.2f} s, peak {format_bytes(result.peak_bytes)}"))
        self.job_finished.emit(job.job_id, result)

    def _explain(self, err: Exception, image: ImageData, segmenter: Segmenter) -> str:
        """A message for the user; after an out-of-memory error, give the cache back first."""
        if isinstance(err, (BudgetTooSmallError, OutsideCapturedSizes)):  # say what to do; class names add nothing
            return f"Segmentation failed: {err}"
        if not is_out_of_memory(err):
            return f"Segmentation failed ({type(err).__name__}): {err}"
        freed = 0
        if segmenter.device.type == "cuda":
            before = torch.cuda.memory_reserved(segmenter.device)
            torch.cuda.empty_cache()
            freed = before - torch.cuda.memory_reserved(segmenter.device)
        return (
            f"Out of memory on {segmenter.device} while segmenting a {image.width}x{image.height} image. "
            f"Recovered: the model is still loaded and {format_bytes(freed)} of cache was given back. "
            "To fit, set a memory budget (e.g. 512 MB) with tiling 'auto', use the lean engine, or bf16."
        )
