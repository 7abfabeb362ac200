"""The driver's side of the Ray batch: start the segmenting actors, hand them chunks of images, journal
each image and yield its record when its chunk comes back.

Each actor has up to IN_FLIGHT_PER_ACTOR chunks queued, so it starts the next chunk the moment it
finishes one; the driver blocks in `ray.wait` meanwhile (no polling loop of its own). The manifest
stays on the driver: every image of a chunk is journalled as pending before the chunk is handed out,
and its record after the chunk has come back, when its outputs exist; a run killed anywhere
resumes like the local batch.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from ..jobs.batch_plan import ImageTask
from ..jobs.manifest import ImageRecord, Manifest
from ..predict import InferenceOptions
from .actors import SegmentingActor, task_to_json

IN_FLIGHT_PER_ACTOR = 2  # chunks queued at each actor: one running, one waiting
WAIT_S = 0.5  # the longest the driver blocks in ray.wait before it looks at cancel again


def start_actors(ray: Any, count: int, threads: int, gpu: bool, options: InferenceOptions,
                 checkpoint: bytes) -> list[Any]:
    """`count` SegmentingActors of `threads` CPUs (and one GPU each when `gpu`), spread over the nodes."""
    actor_class = ray.remote(num_cpus=threads, num_gpus=1 if gpu else 0, scheduling_strategy="SPREAD",
                             max_restarts=0)(SegmentingActor)
    model = ray.put(checkpoint)  # one copy in the object store, fetched once by each node
    device_options = replace(options, device="cuda" if gpu else "cpu")
    return [actor_class.remote(device_options, threads, model) for _ in range(count)]


def chunked(tasks: list[ImageTask], size: int) -> list[list[ImageTask]]:
    return [tasks[i:i + size] for i in range(0, len(tasks), size)]


def dispatch(ray: Any, actors: list[Any], chunks: list[list[ImageTask]], manifest: Manifest,
             stopping: Callable[[], bool]) -> Iterator[list[ImageRecord]]:
    """Yield each chunk's records (journalled) as the chunk comes back, until all are back or `stopping()`.

    Raises ray.exceptions.RayError when an actor could not start or died. On return or error, chunks still
    in flight are left to the caller, which kills the actors; their images stay pending (redone on resume).
    """
    waiting = deque(chunks)
    in_flight: dict[Any, Any] = {}  # ObjectRef of a chunk's records -> the actor segmenting it

    def hand_out(actor: Any) -> None:
        chunk = waiting.popleft()
        for task in chunk:  # pending before any output can be written
            manifest.begin(task.key, list(task.outputs.values()))
        in_flight[actor.segment.remote([task_to_json(task) for task in chunk])] = actor

    for _ in range(IN_FLIGHT_PER_ACTOR):
        for actor in actors:
            if waiting:
                hand_out(actor)
    while in_flight and not stopping():
        ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=WAIT_S)
        for ref in ready:
            actor = in_flight.pop(ref)
            records = ray.get(ref)  # raises if the actor failed
            if waiting:
                hand_out(actor)  # before journalling: the actor has its next chunk queued meanwhile
            chunk_records = [ImageRecord.from_json(data) for data in records]
            for record in chunk_records:
                manifest.finish(record)
            yield chunk_records
