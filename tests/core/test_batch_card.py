"""A batch resumed after the model's card changed (class names, mean/std) is refused like one with other weights:
the card is not in the graph file's sha256, and the results were made with the old one. A new name or
description in the card changes no output, and resumes."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from leanseg.core.cli import main

from . import graph_samples as samples

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_a_batch_resumed_after_its_card_changed_is_refused_and_nothing_is_redone(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = samples.export_onnx(samples.made(), tmp_path / "net.onnx")
    card = samples.write_card(model)
    inputs, out = tmp_path / "photos", tmp_path / "out"
    inputs.mkdir()
    for name in ("a", "b"):
        samples.write_image(inputs / f"{name}.png")
    command = ["batch", str(inputs), "--out", str(out), "--model", str(model), "--threads", "1", "--mirror", "off"]
    assert main(command) == 0
    labels = (out / "a_labels.png").read_bytes()
    summary = (out / "summary.csv").read_text()
    original = card.read_text()

    card.write_text(json.dumps({**json.loads(original), "input": {
        "channels": 3, "mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5], "size_multiple": samples.MULTIPLE}}))
    capsys.readouterr()
    assert main(command) == 2
    said = capsys.readouterr().err
    assert "holds results made with card (sha256 " in said and "--overwrite" in said, said
    assert "model " not in said.split("made with")[1]  # the weights are the same: only the card is named
    assert (out / "a_labels.png").read_bytes() == labels and (out / "summary.csv").read_text() == summary

    card.write_text(json.dumps({**json.loads(original), "name": "renamed", "architecture": "described anew"}))
    assert main(command) == 0  # a name or a description shapes no output: resumed, nothing to redo
    assert "already done" in capsys.readouterr().out
