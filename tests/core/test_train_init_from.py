"""`leanseg train --init-from CHECKPOINT`: a second schedule that starts from a finished run's weights,
through the real CLI on a tiny synthetic data set."""
from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file

from .test_train import kill_when_printed, make_dataset, train_args

FIT = ["--train-splits", "train,val", "--val-split", "none", "--ema", "0.9"]


def _provenance(path: Path) -> dict:
    with safe_open(str(path), "pt") as handle:
        return json.loads(handle.metadata()["leanseg"])["provenance"]


def _learnt(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The trained parameters (BatchNorm's running statistics move in train mode even at lr 0)."""
    return {k: v for k, v in weights.items() if not k.endswith(("running_mean", "running_var", "num_batches_tracked"))}


def _first_run(data: Path, out: Path) -> Path:
    first = subprocess.run(train_args(data, out, epochs=2) + FIT, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr
    return out / "best.safetensors"


def test_second_schedule_starts_from_the_checkpoint_and_records_it(tmp_path: Path) -> None:
    data = make_dataset(tmp_path / "data", train=6, val=2)
    parent = _first_run(data, tmp_path / "first")
    args = train_args(data, tmp_path / "second", epochs=1) + FIT
    args[args.index("--lr") + 1] = "1e-9"  # the weights can only stay where they start
    second = subprocess.run(args + ["--init-from", str(parent)], capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr
    args[args.index("--out") + 1] = str(tmp_path / "fresh")
    fresh = subprocess.run(args, capture_output=True, text=True, timeout=600)  # the same run without --init-from
    assert fresh.returncode == 0, fresh.stderr

    start, result = _learnt(load_file(parent)), _learnt(load_file(tmp_path / "second" / "best.safetensors"))
    assert start.keys() == result.keys()
    for key in start:  # the exported EMA weights too: the average starts from the loaded weights
        torch.testing.assert_close(result[key], start[key], atol=1e-6, rtol=0, msg=key)
    scratch = _learnt(load_file(tmp_path / "fresh" / "best.safetensors"))
    assert max((scratch[k] - start[k]).abs().max().item() for k in start) > 1e-2  # not what the seed gives

    provenance = _provenance(tmp_path / "second" / "best.safetensors")
    assert provenance["initial_weights"]["file"] == str(parent)
    assert provenance["initial_weights"]["sha256"] == hashlib.sha256(parent.read_bytes()).hexdigest()
    assert provenance["initial_weights"]["provenance"]["command"] == _provenance(parent)["command"]
    assert provenance["train_config"]["init_from"] == str(parent)


def test_killed_second_schedule_resumes_without_its_starting_checkpoint(tmp_path: Path) -> None:
    """The starting weights are in the resume state: the run continues after the parent file is gone
    (a committed last.pt in another checkout) and still records where it started."""
    data = make_dataset(tmp_path / "data", train=6, val=2)
    parent = _first_run(data, tmp_path / "first")
    parent_command = _provenance(parent)["command"]
    args = train_args(data, tmp_path / "second", epochs=3) + FIT + ["--init-from", str(parent)]
    kill_when_printed(args, "epoch 1/3")
    parent.unlink()
    resumed = subprocess.run(args + ["--resume"], capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming after epoch 1" in resumed.stdout
    provenance = _provenance(tmp_path / "second" / "best.safetensors")
    assert provenance["epochs"] == 3 and provenance["initial_weights"]["provenance"]["command"] == parent_command
    without = subprocess.run([a for a in args if a not in ("--init-from", str(parent))] + ["--resume"],
                             capture_output=True, text=True, timeout=600)
    assert without.returncode == 2 and "started with --init-from" in without.stderr


def test_a_checkpoint_of_another_model_or_no_checkpoint_is_refused_by_name(tmp_path: Path) -> None:
    data = make_dataset(tmp_path / "data", train=4, val=2)
    parent = _first_run(data, tmp_path / "first")
    wider = train_args(data, tmp_path / "wider", epochs=1) + FIT
    wider[wider.index("--width") + 1] = "0.5"
    refused = subprocess.run(wider + ["--init-from", str(parent)], capture_output=True, text=True, timeout=600)
    assert refused.returncode == 2
    assert str(parent) in refused.stderr and "this run trains" in refused.stderr

    spec = json.loads((data / "spec.json").read_text())
    spec["class_names"][0] = "sky"
    (tmp_path / "other.json").write_text(json.dumps(spec))
    other = train_args(data, tmp_path / "other", epochs=1) + FIT + ["--init-from", str(parent)]
    other[other.index("--spec") + 1] = str(tmp_path / "other.json")
    refused = subprocess.run(other, capture_output=True, text=True, timeout=600)
    assert refused.returncode == 2 and "are not the dataset's" in refused.stderr

    missing = tmp_path / "gone.safetensors"
    refused = subprocess.run(train_args(data, tmp_path / "missing", epochs=1) + FIT + ["--init-from", str(missing)],
                             capture_output=True, text=True, timeout=600)
    assert refused.returncode == 2 and str(missing) in refused.stderr and "no such file" in refused.stderr

    junk = tmp_path / "notes.safetensors"
    junk.write_text("not weights at all")
    refused = subprocess.run(train_args(data, tmp_path / "junk", epochs=1) + FIT + ["--init-from", str(junk)],
                             capture_output=True, text=True, timeout=600)
    assert refused.returncode == 2 and str(junk) in refused.stderr and "Traceback" not in refused.stderr
