"""Weight averages of checkpoints ("model soups"): the arithmetic, the refusals, the provenance, and the
script that writes the default model's soup, run as a subprocess on real files."""
from __future__ import annotations

import dataclasses
import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from leanseg.core.model import MobileUNet, MobileUNetConfig
from leanseg.core.model.checkpoint import default_info, load_checkpoint, read_info, save_checkpoint
from leanseg.core.train.soup import average_checkpoints

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "average_weights.py"


def _checkpoint(path: Path, seed: int, width: float = 0.35, batches: int = 0) -> Path:
    torch.manual_seed(seed)
    model = MobileUNet(MobileUNetConfig(num_classes=4, width=width))
    for module in model.modules():  # distinct batch-norm statistics, so averaging them is checked too
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.normal_()
            module.running_var.uniform_(0.5, 2.0)
            module.num_batches_tracked.fill_(batches)
    info = dataclasses.replace(default_info(model.config), provenance={"command": f"train seed {seed}"})
    return save_checkpoint(path, model.eval(), info)


def test_the_soup_is_the_mean_of_float_tensors_and_records_its_ingredients(tmp_path: Path) -> None:
    paths = [_checkpoint(tmp_path / f"{seed}.safetensors", seed, batches=10 + seed) for seed in (1, 2, 3)]
    soup = average_checkpoints(paths, command="average 1 2 3")
    states = [load_checkpoint(path).model.state_dict() for path in paths]
    result = soup.model.state_dict()
    assert result.keys() == states[0].keys()
    for name, tensor in result.items():
        if tensor.is_floating_point():
            torch.testing.assert_close(tensor, sum(state[name] for state in states) / 3, msg=name)
        else:  # batch counts: the first file's
            assert torch.equal(tensor, states[0][name]), name
    assert any(not torch.equal(result[name], states[0][name]) for name in result if name.endswith("running_var"))

    provenance = soup.info.provenance
    assert provenance["command"] == "average 1 2 3"
    assert [item["file"] for item in provenance["soup_of"]] == [str(path) for path in paths]
    assert [item["sha256"] for item in provenance["soup_of"]] == [hashlib.sha256(p.read_bytes()).hexdigest()
                                                                   for p in paths]
    assert [item["provenance"]["command"] for item in provenance["soup_of"]] == [f"train seed {s}" for s in (1, 2, 3)]
    assert soup.info.class_names == read_info(paths[0]).class_names


def test_another_architecture_or_class_list_is_refused_by_name(tmp_path: Path) -> None:
    first = _checkpoint(tmp_path / "a.safetensors", 1)
    wider = _checkpoint(tmp_path / "wider.safetensors", 2, width=0.5)
    with pytest.raises(ValueError, match=f"{wider}: its model"):
        average_checkpoints([first, wider])

    loaded = load_checkpoint(_checkpoint(tmp_path / "b.safetensors", 3))
    renamed = dataclasses.replace(loaded.info, class_names=("sky", "road", "car", "tree"))
    other = save_checkpoint(tmp_path / "renamed.safetensors", loaded.model, renamed)
    with pytest.raises(ValueError, match=f"{other}: its classes"):
        average_checkpoints([first, other])
    with pytest.raises(ValueError, match="two or more"):
        average_checkpoints([first])


def test_the_script_writes_a_loadable_soup_and_refuses_bad_inputs_without_writing(tmp_path: Path) -> None:
    a, b = _checkpoint(tmp_path / "a.safetensors", 1), _checkpoint(tmp_path / "b.safetensors", 2)
    out = tmp_path / "soup.safetensors"
    done = subprocess.run([sys.executable, str(SCRIPT), str(out), str(a), str(b)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    soup = load_checkpoint(out)
    assert soup.info.provenance["command"].startswith("python scripts/average_weights.py")
    assert str(out) in soup.info.provenance["command"]
    x = torch.randn(1, 3, 64, 64)
    with torch.inference_mode():
        assert soup.model(x).shape == (1, 4, 64, 64)

    junk = tmp_path / "notes.safetensors"
    junk.write_text("not weights")
    refused_out = tmp_path / "refused.safetensors"
    refused = subprocess.run([sys.executable, str(SCRIPT), str(refused_out), str(a), str(junk)],
                             capture_output=True, text=True, timeout=300)
    assert refused.returncode == 1 and str(junk) in refused.stderr and "Traceback" not in refused.stderr
    assert not refused_out.exists()
