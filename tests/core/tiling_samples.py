"""What the tiling tests share: a small PlainUNet config and CPU segmenters for its checkpoints.

The fixtures built from these (`small_unet`, `unet_checkpoint`, `one_torch_thread`) are in conftest.py.
"""
from __future__ import annotations

from pathlib import Path

from leanseg.core.engine.oom import FaultInjection
from leanseg.core.model import PlainUNetConfig
from leanseg.core.model.checkpoint import load_checkpoint
from leanseg.core.predict import InferenceOptions, Segmenter

SMALL_UNET = PlainUNetConfig(num_classes=4, in_channels=3, base_channels=4, depth=2)  # halo 28 px, stride 4


def cpu_segmenter(checkpoint: Path, injection: FaultInjection | None = None, **options: object) -> Segmenter:
    """A CPU Segmenter for `checkpoint`: eager unless `engine` is given; `injection` fails chosen tiles as OOM."""
    options.setdefault("engine", "eager")
    segmenter = Segmenter(load_checkpoint(checkpoint), InferenceOptions(device="cpu", **options))  # type: ignore[arg-type]
    segmenter.fault_injection = injection
    return segmenter
