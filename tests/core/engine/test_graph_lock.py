"""Models traced on one thread while another segments: neither sees the other (torch.fx patches every
thread's module calls while it traces, so both hold the engine's graph lock)."""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from leanseg.core.engine.receptive_field import compute_receptive_field
from leanseg.core.io.images import read_image
from leanseg.core.model.checkpoint import load_checkpoint
from leanseg.core.predict import InferenceOptions, Segmenter


def test_tracing_on_one_thread_never_breaks_a_run_on_another(tiny_checkpoint: Path, rgb_image: Path,
                                                             one_torch_thread: None) -> None:
    image = read_image(rgb_image)
    eager = Segmenter(load_checkpoint(tiny_checkpoint), InferenceOptions(device="cpu", engine="eager"))
    expected = eager.segment(image).labels
    traced_model = load_checkpoint(tiny_checkpoint).model.eval()
    stop, errors, runs = threading.Event(), [], []

    def segment_until_stopped() -> None:
        try:
            while not stop.is_set():
                runs.append(np.array_equal(eager.segment(image).labels, expected))
        except Exception as err:  # what the race raised: "module is not installed as a submodule"
            errors.append(err)

    runner = threading.Thread(target=segment_until_stopped)
    runner.start()
    try:
        for _ in range(15):  # a trace and a lean compile, each patching module calls while it runs
            compute_receptive_field(traced_model)
            Segmenter(load_checkpoint(tiny_checkpoint), InferenceOptions(device="cpu"))
    finally:
        stop.set()
        runner.join(60)
    assert errors == []
    assert runs and all(runs)
