"""The per-image work of a batch: read -> segment -> write outputs -> manifest record.

Each step is a plain function of an `ImageTask`, so the local loop (`run_batch`) can overlap them
on threads, and a cluster job can run `process_image` on workers and `Manifest.finish` on the driver.
"""
from __future__ import annotations

import io
import os
import threading
from dataclasses import dataclass

import numpy as np

from ..events import EventSink, JobCancelled, ignore_event
from ..io.images import ALPHA_IGNORED, ImageData, has_transparency, read_image, to_rgb8
from ..io.outputs import atomic_write_bytes, content_digest, encode_png, overlay
from ..predict import Segmentation, Segmenter
from .batch_plan import ImageTask
from .manifest import ImageRecord, Manifest, OutputFile


class OutputExistsError(Exception):
    """An output path holds a file this batch did not write; it is never replaced without --overwrite."""


@dataclass
class ReadInput:
    """An input as read, with the size and mtime it had (a changed input is redone on resume)."""

    image: ImageData
    input_bytes: int
    input_mtime_ns: int
    transparent: bool = False  # some alpha below opaque: the model sees only RGB (io.images.ALPHA_IGNORED)

    @property
    def note(self) -> str:
        """What reading did to the image, as `segment` says it: the image's note (pages, EXIF rotation, pixel
        range), then the alpha channel ignored; "" when nothing. The record keeps it."""
        return "; ".join(note for note in (self.image.note, ALPHA_IGNORED if self.transparent else "") if note)


def read_input(task: ImageTask) -> ReadInput:
    """Stat, then decode the input; raises ImageReadError naming the file and the problem."""
    stat = task.source.stat()
    image = read_image(task.source)
    return ReadInput(image, stat.st_size, stat.st_mtime_ns, has_transparency(image))


def check_outputs_free(task: ImageTask) -> None:
    """Raise OutputExistsError if an output path is an input of the batch, or holds a file not ours to replace."""
    if task.forbidden:
        names = ", ".join(str(task.out_dir / rel) for rel in sorted(task.forbidden))
        raise OutputExistsError(f"{task.source}: its output {names} is an input of this batch and is never "
                                "overwritten; choose another --out")
    foreign = task.foreign_outputs()
    if foreign:
        names = ", ".join(str(p) for p in foreign)
        raise OutputExistsError(f"{task.source}: {names} already exists and was not written by this batch; "
                                f"{task.how_to_overwrite} to replace it")


def write_outputs(task: ImageTask, read: ReadInput, result: Segmentation,
                  class_colours: tuple[tuple[int, int, int], ...]) -> dict[str, OutputFile]:
    """Write each wanted output atomically (temp file + rename); returns kind -> file, size and checksum."""
    check_outputs_free(task)
    written: dict[str, OutputFile] = {}
    for kind in task.outputs:
        if kind == "labels":
            data = encode_png(result.labels)  # (H, W) uint8 class indices
        elif kind == "overlay":
            data = encode_png(overlay(to_rgb8(read.image), result.labels, class_colours, alpha=task.overlay_alpha))
        elif kind == "probs":
            if result.probs is None:
                raise ValueError(f"{task.source}: probabilities were asked for but the segmenter returned none")
            buffer = io.BytesIO()
            np.save(buffer, result.probs.astype(np.float16))  # (K, H, W)
            data = buffer.getvalue()
        else:
            raise ValueError(f"unknown output kind {kind!r}")
        atomic_write_bytes(task.output_path(kind), data)
        written[kind] = OutputFile(task.outputs[kind], len(data), content_digest(data))
    return written


def ok_record(task: ImageTask, read: ReadInput, result: Segmentation, outputs: dict[str, OutputFile],
              num_classes: int) -> ImageRecord:
    counts = np.bincount(result.labels.ravel(), minlength=num_classes)[:num_classes]
    return ImageRecord(
        source=task.key, status="ok", note=read.note, input_bytes=read.input_bytes,
        input_mtime_ns=read.input_mtime_ns,
        width=read.image.width, height=read.image.height, seconds=result.seconds, peak_bytes=result.peak_bytes,
        device=result.device, peak_device=result.peak_device,
        class_fraction=[round(float(c) / max(result.labels.size, 1), 6) for c in counts],
        outputs=outputs,
    )


def error_record(task: ImageTask, err: BaseException) -> ImageRecord:
    """A failed input: the message names the file (ImageReadError's does already)."""
    message = str(err)
    if isinstance(err, OSError) and err.strerror and not isinstance(err.filename, int):  # not '[Errno 13] ...'
        named = err.filename is not None and os.fsdecode(err.filename) != str(task.source)
        message = f"{task.source}: {os.fsdecode(err.filename) + ': ' if named else ''}{err.strerror}"
    elif str(task.source) not in message:
        message = f"{task.source}: {type(err).__name__}: {message}"
    return ImageRecord(source=task.key, status="error", error=message)


def finish_image(task: ImageTask, read: ReadInput, result: Segmentation, manifest: Manifest | None,
                 class_colours: tuple[tuple[int, int, int], ...]) -> ImageRecord:
    """Write outputs and build the record. With a manifest, note the outputs as pending first (so a kill
    mid-write leaves them ours to redo) and record the result after; without one (a remote worker),
    the caller records it: `manifest.begin` before dispatching, `manifest.finish` on the result."""
    try:
        check_outputs_free(task)  # before `begin`: a file not ours must never be noted as ours
        if manifest is not None:
            manifest.begin(task.key, list(task.outputs.values()))
        outputs = write_outputs(task, read, result, class_colours)
    except (OSError, ValueError, OutputExistsError) as err:
        record = error_record(task, err)
    else:
        record = ok_record(task, read, result, outputs, len(class_colours))
    if manifest is not None:
        manifest.finish(record)
    return record


def process_image(task: ImageTask, segmenter: Segmenter, manifest: Manifest | None = None, *,
                  cancel: threading.Event | None = None, on_event: EventSink = ignore_event) -> ImageRecord:
    """Read -> segment -> write -> record one image, serially (what a cluster worker runs per task).

    Bad inputs and per-image failures (e.g. out of memory) give an error record; JobCancelled
    propagates with nothing written."""
    try:
        check_outputs_free(task)
        read = read_input(task)
        result = segmenter.segment(read.image, cancel=cancel, on_event=on_event)
    except JobCancelled:
        raise
    except Exception as err:  # any failure of this image is recorded and skipped, never fatal
        record = error_record(task, err)
        if manifest is not None:
            manifest.finish(record)
        return record
    return finish_image(task, read, result, manifest, segmenter.info.class_colours)
