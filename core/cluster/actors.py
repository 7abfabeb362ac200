"""What runs inside the Ray cluster: the segmenting actor, one compiled Segmenter per actor, reused for
every chunk of images the driver hands it.

No ray import here: `dispatch` wraps `SegmentingActor` with `ray.remote`. Each image goes through
`process_image`, the local batch's own per-image function, without a manifest: outputs are written
atomically, and the driver journals the image as pending before it hands the chunk out and records
it when the chunk's records come back (after the outputs exist), as `finish_image` describes.
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import torch

from ..jobs.batch_image import process_image
from ..jobs.batch_plan import ImageTask
from ..jobs.manifest import CLI_OVERWRITE
from ..model.sources import load_model
from ..predict import InferenceOptions, Segmenter


def task_to_json(task: ImageTask) -> str:
    return json.dumps({"source": str(task.source), "key": task.key, "out_dir": str(task.out_dir),
                       "outputs": task.outputs, "replaceable": sorted(task.replaceable),
                       "forbidden": sorted(task.forbidden), "overlay_alpha": task.overlay_alpha,
                       "how_to_overwrite": task.how_to_overwrite})


def task_from_json(text: str) -> ImageTask:
    data = json.loads(text)
    return ImageTask(Path(data["source"]), data["key"], Path(data["out_dir"]), dict(data["outputs"]),
                     frozenset(data["replaceable"]), frozenset(data.get("forbidden", ())),
                     float(data.get("overlay_alpha", 0.5)), str(data.get("how_to_overwrite", CLI_OVERWRITE)))


class SegmentingActor:
    """Builds the Segmenter (default engine: compiles its plan) once, then segments every chunk of tasks
    it is given. A failing image is recorded, never raised."""

    def __init__(self, options: InferenceOptions, threads: int, checkpoint: bytes) -> None:
        torch.set_num_threads(threads)
        with tempfile.TemporaryDirectory(prefix="leanseg-model-") as folder:
            path = Path(folder) / "model.safetensors"  # the driver's checkpoint file, shipped as bytes
            path.write_bytes(checkpoint)
            loaded = load_model(path)
        self.segmenter = Segmenter(loaded, options)

    def segment(self, tasks: list[str]) -> list[dict[str, Any]]:
        """(B,) ImageTask JSON strings -> (B,) ImageRecord JSON dicts, in the same order."""
        return [process_image(task_from_json(text), self.segmenter).to_json() for text in tasks]
