"""Opening a model file never runs code from it. A `.pt2` whose sample inputs or weights carry a pickle that
would create a file, an `.pt2` carrying compiled code, an `.onnx` whose external data points outside its
folder, and an `.onnx` with a custom-domain op: each refused with one CheckpointError line, and nothing
created. Plain `torch.export.load` of the same `.pt2` does create the file: the test can fail."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from leanseg.core.model.checkpoint import CheckpointError
from leanseg.core.model.sources import load_model

from . import graph_samples as samples


class FileCreatingPayload:
    """Unpickling this runs `touch MARKER`."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Callable[[str], int], tuple[str]]:
        return os.system, (f"touch '{self.marker}'",)


def pickled(value: object) -> bytes:
    buffer = io.BytesIO()
    torch.save(value, buffer)
    return buffer.getvalue()


def rewritten(source: Path, target: Path, changes: dict[str, Callable[[bytes], bytes]],
              extra: dict[str, bytes] | None = None) -> Path:
    """A copy of the zip `source` with the entries ending in each key of `changes` rewritten (and `extra` added)."""
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as new:
        prefix = old.namelist()[0].split("/", 1)[0]
        for info in old.infolist():
            data = old.read(info.filename)
            for suffix, change in changes.items():
                if info.filename.endswith(suffix):
                    data = change(data)
            new.writestr(info, data)
        for name, data in (extra or {}).items():
            new.writestr(f"{prefix}/{name}", data)
    return target


@pytest.fixture(scope="module")
def plain_pt2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return samples.export_pt2(samples.made(), tmp_path_factory.mktemp("pt2") / "tiny.pt2")


def sample_inputs_payload(plain: Path, folder: Path, marker: Path) -> Path:
    payload = pickled(((FileCreatingPayload(marker),), {}))
    return rewritten(plain, folder / "sample_payload.pt2", {"data/sample_inputs/model.pt": lambda _: payload})


def weights_payload(plain: Path, folder: Path, marker: Path) -> Path:
    def mark_pickled(config: bytes) -> bytes:
        entries = json.loads(config)
        entries["config"]["stem.0.weight"]["use_pickle"] = True
        return json.dumps(entries).encode()

    payload = pickled(FileCreatingPayload(marker))
    return rewritten(plain, folder / "weights_payload.pt2",
                     {"data/weights/model_weights_config.json": mark_pickled,
                      "data/weights/weight_0": lambda _: payload})


PT2_PAYLOADS = {"sample inputs": (sample_inputs_payload, "needs more than weights-only unpickling"),
                "weights": (weights_payload, "stem.0.weight is stored as a pickled object")}


def assert_one_line_refusal(path: Path, phrase: str) -> None:
    with pytest.raises(CheckpointError) as caught:
        load_model(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: refused: ") or message.startswith(f"{path}: "), message
    assert "\n" not in message and phrase in message, message


@pytest.mark.parametrize("where", list(PT2_PAYLOADS))
def test_a_pt2_with_a_pickle_payload_is_refused_and_runs_nothing(where: str, plain_pt2: Path, tmp_path: Path) -> None:
    marker = tmp_path / "created_by_the_payload"
    build, phrase = PT2_PAYLOADS[where]
    evil = build(plain_pt2, tmp_path, marker)
    assert_one_line_refusal(evil, phrase)
    assert not marker.exists()
    # the same file through plain torch.export.load runs the payload: this test would catch a loader that did
    try:
        torch.export.load(str(evil))
    except Exception:  # noqa: BLE001 - the payload has run before torch notices the object is no tensor
        pass
    assert marker.exists(), "torch.export.load no longer unpickles this payload; the test needs a stronger one"


def test_a_pt2_carrying_compiled_code_is_refused(plain_pt2: Path, tmp_path: Path) -> None:
    evil = rewritten(plain_pt2, tmp_path / "aoti.pt2", {}, {"data/aotinductor/model/model.so": b"\x7fELF" + bytes(60)})
    assert_one_line_refusal(evil, "carries compiled code")


def test_the_cli_refuses_a_payload_in_one_line_with_exit_code_2(plain_pt2: Path, tmp_path: Path) -> None:
    marker = tmp_path / "created_by_the_payload"
    evil = sample_inputs_payload(plain_pt2, tmp_path, marker)
    image = tmp_path / "street.png"
    samples.write_image(image)
    result = subprocess.run([sys.executable, "-m", "leanseg.core", "segment", str(image), "--model", str(evil),
                             "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    assert result.stderr.startswith(f"leanseg: error: {evil}: refused: ") and result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr + result.stdout
    assert not marker.exists() and not (tmp_path / "out").exists()


def conv_onnx(path: Path, external: str | None = None, domain: str = "") -> Path:
    """image (1, 3, H, W) -> 1x1 Conv -> Relu (or a custom-domain op); the weights inline or at `external`."""
    weight = numpy_helper.from_array(np.ones((4, 3, 1, 1), np.float32), "w")
    if external is not None:
        weight.ClearField("raw_data")
        weight.data_location = TensorProto.EXTERNAL
        for key, value in (("location", external), ("offset", "0"), ("length", "48")):
            entry = weight.external_data.add()
            entry.key, entry.value = key, value
    last = helper.make_node("RunShell", ["c"], ["logits"], domain=domain, command=f"touch {path.parent}/pwned") \
        if domain else helper.make_node("Relu", ["c"], ["logits"])
    graph = helper.make_graph(
        [helper.make_node("Conv", ["image", "w"], ["c"]), last], "net",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, "height", "width"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 4, "height", "width"])], [weight])
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    path.write_bytes(helper.make_model(graph, opset_imports=opsets).SerializeToString())
    return path


@pytest.mark.parametrize(("case", "phrase"), [
    ("absolute", "should be a relative path, but it is an absolute path: /etc/passwd"),
    ("outside", "points outside the directory"),
    ("symlink", "it is a symbolic link"),
    ("custom_op", "(op RunShell) is not supported"),
])
def test_an_onnx_payload_is_refused_and_creates_nothing(case: str, phrase: str, tmp_path: Path) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    (tmp_path / "secret.bin").write_bytes(b"s" * 48)
    (folder / "inside.bin").symlink_to("/etc/passwd")
    external = {"absolute": "/etc/passwd", "outside": "../secret.bin", "symlink": "inside.bin"}.get(case)
    evil = conv_onnx(folder / f"{case}.onnx", external, domain="com.example.shell" if case == "custom_op" else "")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    assert_one_line_refusal(evil, phrase)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_external_weights_inside_the_folder_still_open(tmp_path: Path) -> None:
    """The refusals above are about where the data lies, not external data as such."""
    (tmp_path / "weights.bin").write_bytes(np.full(12, 0.5, np.float32).tobytes())
    loaded = load_model(conv_onnx(tmp_path / "net.onnx", "weights.bin"))
    assert onnx.load(str(tmp_path / "net.onnx"), load_external_data=False).graph.initializer[0].data_location == 1
    with torch.inference_mode():
        logits = loaded.model(torch.ones(1, 3, 4, 4))
    assert torch.equal(logits, torch.full((1, 4, 4, 4), 1.5))  # 3 channels x 0.5, read from weights.bin
