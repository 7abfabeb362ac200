"""What runs inside the Ray cluster: the segmenting actor (one compiled Segmenter per actor, reused for
every batch) and the manifest keeper (one actor owning the output folder's manifest journal).

Neither imports ray: Ray Data instantiates `SegmentingActor` in its actor pool, and `ray_batch`
wraps `ManifestKeeper` with `ray.remote`. Each image goes through `process_image`, the local
batch's own per-image function: outputs are written atomically, and the manifest gets the
"pending" entry before the writes and the record after them, exactly as in `run_batch`.
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from ..jobs.batch_image import process_image
from ..jobs.batch_plan import ImageTask
from ..jobs.manifest import ImageRecord, Manifest
from ..model.checkpoint import load_checkpoint
from ..predict import InferenceOptions, Segmenter

TASK_COLUMN = "task"  # input rows: one ImageTask as JSON
RECORD_COLUMN = "record"  # output rows: one ImageRecord as JSON


def task_to_json(task: ImageTask) -> str:
    return json.dumps({"source": str(task.source), "key": task.key, "out_dir": str(task.out_dir),
                       "outputs": task.outputs, "replaceable": sorted(task.replaceable)})


def task_from_json(text: str) -> ImageTask:
    data = json.loads(text)
    return ImageTask(Path(data["source"]), data["key"], Path(data["out_dir"]), dict(data["outputs"]),
                     frozenset(data["replaceable"]))


class ManifestKeeper:
    """The batch's Manifest, in one actor that every segmenting actor reports to (thread-safe)."""

    def __init__(self, out_dir: str, fingerprint: dict[str, Any], class_names: tuple[str, ...],
                 checkpoint: bytes) -> None:
        # the driver has just opened it (fresh or not) and planned from it: load what it wrote
        self.manifest = Manifest.open(Path(out_dir), fingerprint, class_names)
        self.checkpoint = checkpoint  # the model file, handed to each segmenting actor once

    def model_bytes(self) -> bytes:
        return self.checkpoint

    def begin(self, source: str, outputs: list[str]) -> None:
        self.manifest.begin(source, outputs)

    def finish(self, record: dict[str, Any]) -> None:
        self.manifest.finish(ImageRecord.from_json(record))

    def close(self) -> None:
        self.manifest.close()


class RemoteManifest:
    """Stands in for a Manifest inside a segmenting actor: begin/finish block until the keeper has
    journalled them (fsynced), so the order on disk is the local batch's."""

    def __init__(self, keeper: Any) -> None:
        self.keeper = keeper  # ray ActorHandle of a ManifestKeeper

    def begin(self, source: str, outputs: list[str]) -> None:
        import ray

        ray.get(self.keeper.begin.remote(source, outputs))

    def finish(self, record: ImageRecord) -> None:
        import ray

        ray.get(self.keeper.finish.remote(record.to_json()))


class SegmentingActor:
    """A Ray Data callable class: builds the Segmenter (default engine: compiles its plan) once, then
    segments every batch of tasks it is given. A failing image is recorded, never raised."""

    def __init__(self, options: InferenceOptions, threads: int, keeper: Any) -> None:
        import ray

        torch.set_num_threads(threads)
        with tempfile.TemporaryDirectory(prefix="leanseg-model-") as folder:
            path = Path(folder) / "model.safetensors"  # the driver's checkpoint file, fetched as bytes
            path.write_bytes(ray.get(keeper.model_bytes.remote()))
            loaded = load_checkpoint(path)
        self.segmenter = Segmenter(loaded, options)
        self.manifest = cast(Manifest, RemoteManifest(keeper))  # process_image calls begin() and finish() only

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """{'task': (B,) JSON strings} -> {'record': (B,) JSON strings}, in the same order."""
        records = [process_image(task_from_json(str(text)), self.segmenter, self.manifest).to_json()
                   for text in batch[TASK_COLUMN]]
        return {RECORD_COLUMN: np.array([json.dumps(r) for r in records], dtype=object)}
