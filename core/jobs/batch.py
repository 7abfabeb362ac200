"""The `batch` job: segment a folder of images, resumable, shared by `leanseg batch` and the GUI.

    reader thread (decode, up to `prefetch` ahead) -> this thread (infer) -> writer thread
    (encode, write atomically, record in the manifest)

Cancel: `stop_after_current` is honoured between images; `cancel` also between tiles of a large
image (the image in flight is then dropped, and redone on resume). Events may come from the
writer thread: sinks must be thread-safe (the GUI's turn them into queued signals).
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import torch

from ..engine.multiscale import format_scales
from ..events import EventSink, JobCancelled, JobEvent, ignore_event, said_once
from ..io.images import ALPHA_IGNORED
from ..io.outputs import OutputPathError, check_output_folder
from ..io.pixel_range import READING_RULES
from ..model.checkpoint import ModelInfo
from ..predict import Segmentation, Segmenter
from .batch_image import ReadInput, check_outputs_free, error_record, finish_image, read_input
from .batch_plan import (
    CLI_RECURSE,
    BatchPlan,
    BatchSettings,
    ImageTask,
    changed_inputs_note,
    not_read_notes,
    plan_batch,
    remove_stale_temp_files,
    require_images,
)
from .folder_lock import FolderLock
from .manifest import MANIFEST_NAME, SUMMARY_NAME, ImageRecord, Manifest
from .prefetch import BackgroundWriter, Prefetcher


@dataclass
class BatchSummary:
    settings: BatchSettings
    total: int = 0  # images found in the input folder
    finished_before: int = 0  # skipped: finished and intact from an earlier run
    left_out: list[str] = field(default_factory=list)  # files in the input folder that are not images, not read
    image_folders: list[str] = field(default_factory=list)  # sub-folders with images, not read (not recursive)
    hidden_images: list[str] = field(default_factory=list)  # image files named ".NAME", not read
    records: list[ImageRecord] = field(default_factory=list)  # this run's images, in finishing order
    cancelled: bool = False  # stopped before every image was done
    seconds: float = 0.0  # wall time of this run

    @property
    def ok(self) -> list[ImageRecord]:
        return [r for r in self.records if r.status == "ok"]

    @property
    def failed(self) -> list[ImageRecord]:
        return [r for r in self.records if r.status != "ok"]

    @property
    def remaining(self) -> int:
        return self.total - self.finished_before - len(self.records)

    @property
    def all_ok(self) -> bool:
        """Every input in the folder is segmented (now or before), none failed."""
        return not self.cancelled and not self.failed and self.remaining == 0

    @property
    def manifest_path(self) -> Path:
        return self.settings.out_dir / MANIFEST_NAME

    @property
    def summary_path(self) -> Path:
        return self.settings.out_dir / SUMMARY_NAME

    def not_read_notes(self, how_to_recurse: str = CLI_RECURSE) -> list[str]:
        """A line for each kind of thing left out: files that are not images, sub-folders with images (the line
        ends with `how_to_recurse` them), hidden images."""
        return not_read_notes(self.left_out, self.image_folders, self.hidden_images, how_to_recurse)


def model_fingerprint(segmenter: Segmenter) -> dict[str, str]:
    """What determines the labels: the weights' sha256, a graph's card, the precision, mirror and multi-scale
    averaging (not the file name), and the version of the rules that read stored values as the model's 0..1.
    `scales` is written only when it is not the image's size alone, as manifests before it were."""
    digest = hashlib.sha256()
    path = segmenter.loaded.path
    if path is not None and Path(path).is_file():
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    else:
        for name, tensor in sorted(segmenter.loaded.model.state_dict().items()):
            digest.update(name.encode())
            digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    name = Path(path).name if path is not None else "(in memory)"
    fingerprint = {"model": name, "sha256": digest.hexdigest(), "precision": segmenter.options.precision,
                   "mirror": segmenter.options.mirror, "reading": READING_RULES}
    if segmenter.options.multiscale:
        fingerprint["scales"] = format_scales(segmenter.options.scales)
    if segmenter.loaded.info.provenance.get("card_json"):  # a graph's card is not in the file's sha256
        fingerprint["card"] = card_digest(segmenter.loaded.info)
    return fingerprint


def card_digest(info: ModelInfo) -> str:
    """sha256 of what a graph's card gives that shapes the outputs: class names and colours, mean/std, channel
    order and output kind (not its name, architecture or other keys, nor whether a default was written out)."""
    card = json.loads(str(info.provenance["card_json"]))
    shaping = {"classes": list(info.class_names), "colours": [list(c) for c in info.class_colours],
               "mean": list(info.mean), "std": list(info.std),
               "channel_order": card.get("input", {}).get("channel_order", "RGB"),
               "output": (str(card.get("output") or "logits").split() or ["logits"])[0]}
    return hashlib.sha256(json.dumps(shaping, sort_keys=True).encode()).hexdigest()


def run_batch(
    settings: BatchSettings,
    segmenter: Segmenter,
    *,
    cancel: threading.Event | None = None,
    stop_after_current: threading.Event | None = None,
    on_event: EventSink = ignore_event,
) -> BatchSummary:
    """Segment every image in `settings.in_dir` not already finished in `settings.out_dir`.

    Raises ValueError if the input folder holds no image (before the output folder is created) or an input
    folder cannot be read ('{folder}: cannot read this folder (Permission denied)'),
    OutputPathError if the output folder cannot be written (as `leanseg batch` says it: `cannot_write_output`),
    ManifestError if the output folder holds another model's results (unless overwrite), and
    FolderBusyError (a ManifestError) if another run is writing it. Bad inputs are recorded in
    summary.csv and skipped; the batch goes on.
    """
    if settings.write_probs and not segmenter.options.want_probs:
        raise ValueError("write_probs needs a Segmenter made with InferenceOptions(want_probs=True)")
    require_images(settings)
    require_writable_output(settings)
    try:
        with FolderLock(settings.out_dir, on_note=partial(_warn, on_event)):
            return _run_batch(settings, segmenter, cancel, stop_after_current, on_event)
    except OutputPathError:
        raise  # names the file and why already
    except OSError as err:  # in the output folder (e.g. the lock file refused): said as `leanseg batch` says it
        if not within_folder(err.filename, settings.out_dir):  # an input: not the output folder's fault
            raise ValueError(describe_batch_os_error(settings.out_dir, err)) from err
        raise OutputPathError(cannot_write_output(settings.out_dir, err)) from err


def within_folder(filename: str | bytes | int | None, folder: Path) -> bool:
    """Whether an OSError's file lies in `folder` (or is it); a file-less error counts as the folder's."""
    if filename is None or isinstance(filename, int):
        return True
    path = Path(os.fsdecode(filename)).resolve()
    return path == folder.resolve() or folder.resolve() in path.parents


def require_writable_output(settings: BatchSettings) -> None:
    """OutputPathError, before the folder is locked or created, unless files can be made in the output folder
    (or the folder above it that exists): '{out_dir}: cannot write the output folder (no permission to write in
    ...)'. Writes nothing that stays."""
    check_output_folder(settings.out_dir, "")


def describe_batch_os_error(out_dir: Path, err: OSError) -> str:
    """An OSError of a batch, blamed on what it is about: the output folder (`cannot_write_output`), or the input
    file or folder it names ('rec/locked: cannot read it (Permission denied)')."""
    if isinstance(err, OutputPathError) or within_folder(err.filename, out_dir):
        return cannot_write_output(out_dir, err)
    return f"{os.fsdecode(err.filename)}: cannot read it ({err.strerror or err})"  # type: ignore[arg-type]


def cannot_write_output(out_dir: Path, err: OSError) -> str:
    """How `leanseg batch` and the app say an error writing the output folder: the message of an OutputPathError
    (it names the file and why), else '{out_dir}: cannot write the output folder (Permission denied)'."""
    if isinstance(err, OutputPathError):
        return str(err)
    return f"{out_dir}: cannot write the output folder ({err.strerror or err})"


def _run_batch(settings: BatchSettings, segmenter: Segmenter, cancel: threading.Event | None,
               stop_after_current: threading.Event | None, on_event: EventSink) -> BatchSummary:
    start = time.perf_counter()
    info = segmenter.info
    manifest, plan, summary = open_batch(settings, model_fingerprint(segmenter), info.class_names,
                                         f"on {segmenter.device}", on_event)
    todo = len(plan.tasks)
    lock = threading.Lock()

    def done(record: ImageRecord) -> None:  # on the writer thread
        with lock:
            summary.records.append(record)
            index = len(summary.records) - 1
        source = str(settings.in_dir / record.source)
        if record.status == "ok":
            message = f"{record.source}: {record.width}x{record.height}, {record.seconds:.2f} s"
            on_event(JobEvent("image", message, index=index, count=todo, path=source, data=record.to_json()))
        else:
            on_event(JobEvent("error", record.error, index=index, count=todo, path=source, data=record.to_json()))

    def finish_ok(task: ImageTask, read: ReadInput, result: Segmentation) -> None:
        done(finish_image(task, read, result, manifest, info.class_colours))

    def finish_error(task: ImageTask, err: BaseException) -> None:
        record = error_record(task, err)
        manifest.finish(record)
        done(record)

    def stopping() -> bool:
        return bool((cancel and cancel.is_set()) or (stop_after_current and stop_after_current.is_set()))

    on_event = said_once(on_event, "alpha_ignored")
    try:
        with BackgroundWriter(depth=settings.prefetch) as writer, \
                Prefetcher(plan.tasks, _read_checked, depth=settings.prefetch) as reader:
            for started, (task, read) in enumerate(reader):
                if stopping():
                    summary.cancelled = True
                    break
                if isinstance(read, BaseException):
                    writer.submit(partial(finish_error, task, read))
                    continue
                on_event(JobEvent("info", f"segmenting {task.key}", index=started, count=todo,
                                  path=str(task.source), data={"stage": "segmenting"}))
                if read.image.note:  # each image's, as `segment` says it; its record keeps it too
                    on_event(JobEvent("info", f"{task.key}: {read.image.note}", path=str(task.source),
                                      data={"note": read.image.note}))
                if read.transparent:  # said once, for the first such image (each record says it)
                    on_event(JobEvent("info", f"{task.key}: {ALPHA_IGNORED}", path=str(task.source),
                                      data={"alpha_ignored": True}))
                try:
                    result = segmenter.segment(read.image, cancel=cancel, on_event=on_event)
                except JobCancelled:
                    summary.cancelled = True
                    break
                except Exception as err:  # e.g. out of memory on this image: record it, go on
                    if segmenter.device.type == "cuda":
                        torch.cuda.empty_cache()  # give the failed image's cache back before the next
                    writer.submit(partial(finish_error, task, err))
                    continue
                writer.submit(partial(finish_ok, task, read, result))
    finally:
        manifest.close()
    summary.cancelled = summary.cancelled or (stopping() and summary.remaining > 0)
    return finish_summary(summary, todo, start, on_event)


def open_batch(settings: BatchSettings, fingerprint: dict[str, Any], class_names: tuple[str, ...], where: str,
               on_event: EventSink) -> tuple[Manifest, BatchPlan, BatchSummary]:
    """Open the output folder's manifest, clear stale temp files, plan what is left, report 'start'.

    Shared by the local batch and the Ray batch (each holds the folder's lock around it); `where` ends
    the start message ("on cpu", "on Ray"). Each damaged output found is a warning, and its image is redone.
    The manifest records the output options beside the model's fingerprint: a resume with others is refused.
    """
    fingerprint = {**fingerprint, "outputs": settings.output_options}
    manifest = Manifest.open(settings.out_dir, fingerprint, class_names, fresh=settings.overwrite,
                             how_to_overwrite=settings.how_to_overwrite)
    remove_stale_temp_files(settings.out_dir)
    plan = plan_batch(settings, manifest)
    for damage in plan.damaged:
        _warn(on_event, damage)
    if plan.changed:
        _warn(on_event, changed_inputs_note(plan.changed))
    summary = BatchSummary(settings, total=plan.total, finished_before=len(plan.finished), left_out=plan.left_out,
                           image_folders=plan.image_folders, hidden_images=plan.hidden_images)
    todo = len(plan.tasks)
    on_event(JobEvent(
        "start", f"{plan.total} image(s) in {settings.in_dir}: {todo} to segment, {len(plan.finished)} finished "
        f"before; {where}", count=todo,
        data={"total": plan.total, "finished_before": [manifest.records[k].to_json() for k in plan.finished],
              "left_out": plan.left_out, "image_folders": plan.image_folders, "hidden_images": plan.hidden_images},
    ))
    return manifest, plan, summary


def finish_summary(summary: BatchSummary, todo: int, start: float, on_event: EventSink) -> BatchSummary:
    """Stamp the run time and report the end ('cancelled' if stopped early, then 'done')."""
    summary.seconds = time.perf_counter() - start
    if summary.cancelled:
        on_event(JobEvent("cancelled", f"stopped with {summary.remaining} image(s) left; run again to resume",
                          index=len(summary.records), count=todo))
    on_event(JobEvent("done", f"{len(summary.ok)} segmented, {len(summary.failed)} failed, "
                      f"{summary.finished_before} finished before, {summary.remaining} left",
                      count=todo, data={"seconds": summary.seconds}))
    return summary


def _warn(on_event: EventSink, message: str) -> None:
    on_event(JobEvent("warning", message))


def _read_checked(task: ImageTask) -> ReadInput:
    check_outputs_free(task)  # before spending inference on it
    return read_input(task)
