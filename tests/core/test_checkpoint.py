from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from leanseg.core.model import MobileUNet, MobileUNetConfig, PlainUNet, PlainUNetConfig
from leanseg.core.model.checkpoint import (
    FORMAT_VERSION,
    CheckpointError,
    default_info,
    load_checkpoint,
    save_checkpoint,
)


@pytest.mark.parametrize(
    "model", [MobileUNet(MobileUNetConfig(num_classes=5, width=0.35)), PlainUNet(PlainUNetConfig(base_channels=8))]
)
def test_round_trip_gives_identical_outputs(tmp_path: Path, model: torch.nn.Module) -> None:
    model.eval()
    info = default_info(model.config)  # type: ignore[arg-type]
    path = save_checkpoint(tmp_path / "m.safetensors", model, info)
    loaded = load_checkpoint(path)
    x = torch.randn(1, 3, 40, 56)
    with torch.inference_mode():
        assert torch.equal(model(x), loaded.model(x))
    assert loaded.info == info
    assert not list(tmp_path.glob("*.tmp"))


def test_not_a_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "notes.safetensors"
    path.write_text("hello, this is text and not weights at all")
    with pytest.raises(CheckpointError, match=f"{path}.*not a readable safetensors"):
        load_checkpoint(path)


def test_plain_safetensors_without_metadata(tmp_path: Path) -> None:
    path = tmp_path / "foreign.safetensors"
    save_file({"w": torch.zeros(3)}, str(path))
    with pytest.raises(CheckpointError, match="not a leanseg checkpoint"):
        load_checkpoint(path)


def test_truncated(tmp_checkpoint_bytes: bytes, tmp_path: Path) -> None:
    path = tmp_path / "cut.safetensors"
    path.write_bytes(tmp_checkpoint_bytes[: len(tmp_checkpoint_bytes) // 2])
    with pytest.raises(CheckpointError, match="truncated"):
        load_checkpoint(path)


def test_config_weights_mismatch(tiny_checkpoint: Path, tmp_path: Path) -> None:
    from safetensors import safe_open

    with safe_open(str(tiny_checkpoint), "pt") as handle:
        meta = json.loads(handle.metadata()["leanseg"])
        tensors = {k: handle.get_tensor(k) for k in handle.keys()}
    meta["config"]["width"] = 0.5
    path = tmp_path / "mismatch.safetensors"
    save_file(tensors, str(path), metadata={"leanseg": json.dumps(meta)})
    with pytest.raises(CheckpointError, match="weights do not match the model config"):
        load_checkpoint(path)


def test_newer_format_version(tiny_checkpoint: Path, tmp_path: Path) -> None:
    from safetensors import safe_open

    with safe_open(str(tiny_checkpoint), "pt") as handle:
        meta = json.loads(handle.metadata()["leanseg"])
        tensors = {k: handle.get_tensor(k) for k in handle.keys()}
    meta["format_version"] = FORMAT_VERSION + 1
    path = tmp_path / "future.safetensors"
    save_file(tensors, str(path), metadata={"leanseg": json.dumps(meta)})
    with pytest.raises(CheckpointError, match="newer than this leanseg supports"):
        load_checkpoint(path)


@pytest.fixture
def tmp_checkpoint_bytes(tiny_checkpoint: Path) -> bytes:
    return tiny_checkpoint.read_bytes()


def test_saved_files_get_normal_permissions(tmp_path: Path) -> None:
    """Atomic writes go through a temp file; the result must not stay private (0600) like mkstemp's."""
    import os
    import stat

    from leanseg.core.io.outputs import FILE_MODE

    path = save_checkpoint(tmp_path / "m.safetensors", PlainUNet(PlainUNetConfig(base_channels=4, depth=1)),
                           default_info(PlainUNetConfig(base_channels=4, depth=1)))
    assert stat.S_IMODE(os.stat(path).st_mode) == FILE_MODE
