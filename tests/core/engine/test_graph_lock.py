"""Models traced on one thread while another segments, or opens a model file: neither sees the other
(torch.fx patches every thread's module calls while it traces, so both hold the engine's graph lock)."""
from __future__ import annotations

import linecache
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from torch import Tensor, nn

from leanseg.core.engine.graph_lock import symbolic_trace
from leanseg.core.engine.receptive_field import compute_receptive_field
from leanseg.core.io.images import read_image
from leanseg.core.model.bundle import save_bundle
from leanseg.core.model.checkpoint import LoadedModel, load_checkpoint
from leanseg.core.model.sources import load_model
from leanseg.core.predict import InferenceOptions, Segmenter

from .. import graph_samples as samples


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


class HeldTrace(nn.Module):
    """A model whose forward, while torch.fx traces it, waits for `release`: the tracer's patch of every
    thread's module calls stays in place meanwhile."""

    def __init__(self, tracing: threading.Event, release: threading.Event) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 1)
        self.tracing, self.release = tracing, release

    def forward(self, x: Tensor) -> Tensor:
        self.tracing.set()
        self.release.wait(120)
        return self.conv(x)


def waits_for_graph_lock(thread: threading.Thread) -> bool:
    """Whether `thread` stands at a line acquiring GRAPH_LOCK (blocked there: another thread holds it)."""
    frame = sys._current_frames().get(thread.ident or -1)
    return frame is not None and "GRAPH_LOCK" in linecache.getline(frame.f_code.co_filename, frame.f_lineno)


@pytest.mark.parametrize("fmt", ["onnx", "leanseg"])
def test_a_graph_model_file_opened_while_another_thread_traces(fmt: str, tmp_path: Path,
                                                               one_torch_thread: None) -> None:
    """The video panel opens its model while the main window's worker compiles the same one: opening probes the
    graph by running it, which must wait for the trace (it failed "module is not installed as a submodule")."""
    model_path = samples.export_onnx(samples.made(), tmp_path / "tiny.onnx")
    samples.write_card(model_path)
    if fmt == "leanseg":
        model_path = save_bundle(load_model(model_path), tmp_path / "tiny.leanseg")
    tracing, release = threading.Event(), threading.Event()
    loaded: list[LoadedModel] = []
    errors: list[BaseException] = []

    def open_bundle() -> None:
        try:
            loaded.append(load_model(model_path))
        except Exception as err:  # what the race raised
            errors.append(err)

    tracer = threading.Thread(target=symbolic_trace, args=(HeldTrace(tracing, release),))
    opener = threading.Thread(target=open_bundle)
    tracer.start()
    try:
        assert tracing.wait(60)
        opener.start()
        deadline = time.monotonic() + 120
        while opener.is_alive() and not waits_for_graph_lock(opener):  # done, or blocked until the trace ends
            assert time.monotonic() < deadline, "the opener neither finished nor waited for GRAPH_LOCK"
            opener.join(0.01)
    finally:
        release.set()
        tracer.join(60)
    opener.join(60)
    assert errors == []
    assert loaded[0].info.config.num_classes == len(samples.CLASSES)
