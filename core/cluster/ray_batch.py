"""The batch job on a Ray cluster: same outputs, summary.csv, manifest.json and resume as `run_batch`.

    driver: open the manifest, plan (skip what is finished) -> chunks of `batch_size` tasks handed to
    Ray actors (SegmentingActor: one compiled Segmenter each) -> records come back -> manifest, events

Every node must see the input and output folders at the same paths (shared storage); the model is
shipped to the actors as bytes. The driver journals each image (pending before its chunk is handed
out, the record once its outputs exist; see `dispatch`), so a run killed anywhere resumes like the
local batch. Stopping (cancel or stop_after_current) ends the run at once: images in flight are
dropped and redone on resume. Ray is imported inside functions: `leanseg.core` works without it.

Ray core actors rather than Ray Data's `map_batches`: on a 2-core machine, Ray Data's streaming
executor (polling in the driver), its helper actors and a manifest actor took about 30 ms of CPU per
image beside ~140 ms of inference, and 2 actors reached 0.95-1.36x one actor's rate; handing out
chunks with `ray.wait` costs about 6 ms per image (scripts/bench_ray.py, README).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..events import EventSink, JobEvent, ignore_event
from ..jobs.batch import BatchSummary, finish_summary, model_fingerprint, open_batch
from ..jobs.batch_plan import BatchSettings
from ..jobs.folder_lock import FolderLock
from ..jobs.manifest import ImageRecord
from ..model.checkpoint import LoadedModel, save_checkpoint
from ..predict import InferenceOptions, Segmenter
from .dispatch import chunked, dispatch, start_actors

INSTALL_HINT = "install the cluster extra: pip install 'leanseg[cluster]'"


class RayBatchError(Exception):
    """Ray is not installed, the cluster cannot run the job as asked, or the job failed; the message says
    what to do."""


@dataclass(frozen=True)
class RayOptions:
    """Where and how wide the batch runs on Ray."""

    address: str | None = None  # None: a local Ray instance on this machine; else a cluster's HOST:PORT or 'auto'
    actors: int | None = None  # segmenting actors; None: as many as the cluster's CPUs (or GPUs) allow
    threads_per_actor: int = 1  # torch threads per actor, and the CPUs each actor reserves
    batch_size: int = 4  # images per call to an actor: larger amortises overhead, smaller balances load

    def __post_init__(self) -> None:
        for name in ("threads_per_actor", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.actors is not None and self.actors < 1:
            raise ValueError(f"actors must be at least 1, got {self.actors}")


def import_ray() -> Any:
    """The ray module, or RayBatchError saying how to install it."""
    try:
        import ray
    except ImportError as err:
        raise RayBatchError(f"--ray needs Ray, which is not installed ({err}); {INSTALL_HINT}") from err
    return ray


def run_batch_on_ray(
    settings: BatchSettings,
    loaded: LoadedModel,
    options: InferenceOptions,
    ray_options: RayOptions,
    *,
    cancel: threading.Event | None = None,
    stop_after_current: threading.Event | None = None,
    on_event: EventSink = ignore_event,
) -> BatchSummary:
    """Segment every unfinished image of `settings.in_dir` on a Ray actor pool; returns like run_batch.

    Raises RayBatchError (no ray, or too few CPUs/GPUs for the actors asked for) and
    ManifestError (the output folder holds another model's results, unless overwrite; or
    FolderBusyError: another run holds the folder's lock).
    """
    ray = import_ray()
    if settings.write_probs and not options.want_probs:
        raise ValueError("write_probs needs InferenceOptions(want_probs=True)")
    # one writer per output folder: the driver holds the lock for the whole run (actors only write outputs)
    with FolderLock(settings.out_dir, on_note=lambda note: on_event(JobEvent("warning", note))):
        return _run_on_ray(ray, settings, loaded, options, ray_options, cancel, stop_after_current, on_event)


def _run_on_ray(ray: Any, settings: BatchSettings, loaded: LoadedModel, options: InferenceOptions,
                ray_options: RayOptions, cancel: threading.Event | None, stop_after_current: threading.Event | None,
                on_event: EventSink) -> BatchSummary:
    start = time.perf_counter()
    # the fingerprint reads weights and precision only: an eager CPU Segmenter compiles nothing
    fingerprint = model_fingerprint(Segmenter(loaded, replace(options, engine="eager", device="cpu")))
    manifest, plan, summary = open_batch(settings, fingerprint, loaded.info.class_names, "on Ray", on_event)
    todo = len(plan.tasks)

    def stopping() -> bool:
        return bool((cancel and cancel.is_set()) or (stop_after_current and stop_after_current.is_set()))

    if todo == 0 or stopping():
        manifest.close()
        summary.cancelled = todo > 0
        return finish_summary(summary, todo, start, on_event)
    started_ray = False
    actors: list[Any] = []
    try:
        started_ray = _connect(ray, ray_options.address)
        pool = _pool_size(ray, ray_options, options)
        on_event(JobEvent("plan", f"ray: {pool.describe()}, batches of {ray_options.batch_size} image(s)",
                          data=pool.__dict__))
        actors = start_actors(ray, pool.actors, pool.threads, pool.gpu, options, _checkpoint_bytes(loaded))
        first_at: float | None = None
        try:
            for records in dispatch(ray, actors, chunked(plan.tasks, ray_options.batch_size), manifest, stopping):
                for record in records:
                    first_at = first_at or time.perf_counter()
                    summary.records.append(record)
                    _report(record, len(summary.records), todo, settings, first_at, on_event)
        except ray.exceptions.RayError as err:  # an actor could not start, or the cluster went away
            raise RayBatchError(f"the Ray job stopped: {_summary_line(err)}; finished images are recorded in "
                                f"{settings.out_dir}, run again to resume") from err
        summary.cancelled = len(summary.records) < todo
    finally:
        try:
            for actor in actors:  # chunks still in flight are dropped: their images stay pending
                ray.kill(actor)
        finally:
            manifest.close()  # final manifest.json and summary.csv
            if started_ray:
                ray.shutdown()
    return finish_summary(summary, todo, start, on_event)


@dataclass(frozen=True)
class PoolSize:
    nodes: int  # alive nodes in the cluster
    cpus: float  # CPUs the cluster offers
    gpus: float
    actors: int  # segmenting actors to start
    threads: int  # per actor
    gpu: bool  # one GPU per actor

    def describe(self) -> str:
        device = "1 GPU" if self.gpu else f"{self.threads} thread(s)"
        return (f"{self.nodes} node(s), {self.cpus:g} CPU(s), {self.gpus:g} GPU(s); "
                f"{self.actors} actor(s) x {device}")


def _pool_size(ray: Any, ray_options: RayOptions, options: InferenceOptions) -> PoolSize:
    """How many actors the cluster can hold; RayBatchError when the request does not fit."""
    resources = ray.cluster_resources()
    cpus, gpus = float(resources.get("CPU", 0)), float(resources.get("GPU", 0))
    nodes = sum(1 for node in ray.nodes() if node.get("Alive"))
    gpu = options.device.startswith("cuda") or (options.device == "auto" and gpus >= 1)
    threads = ray_options.threads_per_actor
    fits = int(min(cpus // threads, gpus)) if gpu else int(cpus // threads)
    actors = ray_options.actors or max(fits, 1)
    if actors > fits:
        need = f"{actors} x {threads} CPU(s)" + (f" and {actors} GPU(s)" if gpu else "")
        raise RayBatchError(
            f"the Ray cluster offers {cpus:g} CPU(s) and {gpus:g} GPU(s) on {nodes} node(s); {actors} actor(s) "
            f"need {need}; lower --actors or --threads-per-actor, or add nodes (ray start --address ...)")
    return PoolSize(nodes, cpus, gpus, actors, threads, gpu)


def _connect(ray: Any, address: str | None) -> bool:
    """Join the cluster at `address` (None: start a local instance); True when this call started Ray."""
    if ray.is_initialized():
        return False
    import logging

    try:
        ray.init(address=address or "local", include_dashboard=False, log_to_driver=False,
                 logging_level=logging.WARNING, configure_logging=True)
    except (ConnectionError, ValueError, RuntimeError) as err:
        where = f"the Ray cluster at {address}" if address else "a local Ray instance"
        raise RayBatchError(f"could not connect to {where}: {err}; start one with `ray start --head` "
                                  "(see README, 'Running on a Ray cluster')") from err
    return True


def _checkpoint_bytes(loaded: LoadedModel) -> bytes:
    """The model as one file's bytes for the actors: a graph model (.pt2/.onnx) as a `.leanseg` bundle, so
    its card travels with it; a leanseg checkpoint as its file (saved to a temporary file when it has none)."""
    from ..model.graph_model import GraphModel

    is_graph = isinstance(loaded.model, GraphModel)
    if not is_graph and loaded.path is not None and Path(loaded.path).is_file():
        return Path(loaded.path).read_bytes()
    import tempfile

    with tempfile.TemporaryDirectory(prefix="leanseg-model-") as folder:
        if is_graph:
            from ..model.bundle import save_bundle

            return save_bundle(loaded, Path(folder) / "model.leanseg").read_bytes()
        return save_checkpoint(Path(folder) / "model.safetensors", loaded.model, loaded.info).read_bytes()


def _summary_line(err: BaseException) -> str:
    lines = [line for line in str(err).splitlines() if line.strip()]
    return lines[-1] if lines else type(err).__name__


def _report(record: ImageRecord, done: int, todo: int, settings: BatchSettings, first_at: float,
            on_event: EventSink) -> None:
    """One image or error event; data carries the record and images/s across the cluster so far."""
    elapsed = time.perf_counter() - first_at
    rate = (done - 1) / elapsed if done > 1 and elapsed > 0 else 0.0  # from the first finished image on
    data = {**record.to_json(), "images_per_s": rate}
    source = str(settings.in_dir / record.source)
    if record.status == "ok":
        message = f"{record.source}: {record.width}x{record.height}, {record.seconds:.2f} s"
        on_event(JobEvent("image", message, index=done - 1, count=todo, path=source, data=data))
    else:
        on_event(JobEvent("error", record.error, index=done - 1, count=todo, path=source, data=data))


