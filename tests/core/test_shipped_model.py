"""The default model as it ships: within issue 17's size limits, carrying the command that reproduces it (one today's
`leanseg train` accepts), its data and the held-out figures that chose its recipe; and the script that copies a
run's weights into it with those figures, run as a subprocess on real files."""
from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from leanseg.core.assets import default_model_path
from leanseg.core.cli import build_parser
from leanseg.core.model import MobileUNet, MobileUNetConfig
from leanseg.core.model.checkpoint import default_info, load_checkpoint, read_info, save_checkpoint

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "record_model_figures.py"
SEQUENCES = ("0016E5", "0006R0", "0001TP")


def _training_runs(provenance: dict) -> list[dict]:
    """The `leanseg train` runs behind a checkpoint's provenance: its own, or each averaged ingredient's (a soup),
    and, for a run that started from other weights (--init-from), those weights' runs too."""
    if "soup_of" in provenance:
        return [run for ingredient in provenance["soup_of"] for run in _training_runs(ingredient["provenance"])]
    runs = [provenance]
    if "initial_weights" in provenance:
        runs += _training_runs(provenance["initial_weights"]["provenance"])
    return runs


def test_the_shipped_model_fits_the_limits_and_says_how_it_was_made() -> None:
    path = default_model_path()
    loaded = load_checkpoint(path)
    assert sum(p.numel() for p in loaded.model.parameters()) <= 4_000_000
    assert path.stat().st_size <= 16 * 1024 * 1024
    provenance = loaded.info.provenance
    assert "CamVid" in provenance["data"]
    for sequence in SEQUENCES:  # the recipe's own fold figure on every held-out sequence
        assert 0.0 < provenance["heldout_sequence_miou"][sequence]["this_recipe"] < 1.0, sequence
    assert 0.0 < provenance["val_fit_miou"] < 1.0
    if "made_by" in provenance:  # a script runs the whole recipe (several runs and an average)
        assert (REPO / provenance["made_by"].split()[0]).is_file()
    from_scratch = 0
    for run in _training_runs(provenance):
        command = shlex.split(run["command"])
        assert command[:2] == ["leanseg", "train"]
        args = build_parser().parse_args(command[1:])  # still a command today's CLI runs
        assert run["split"] == "train+val" and args.train_splits == "train,val" and args.val_split == "none"
        if args.init_from is None:
            from_scratch += 1
        else:  # the weights it started from are named by SHA-256, and their own run is among these
            assert len(run["initial_weights"]["sha256"]) == 64
    assert from_scratch >= 1  # the commands alone reproduce the weights, from scratch


def _run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=120)


def _refusal(capsys: pytest.CaptureFixture[str], *args: str | Path) -> str:
    """The script's main, run in this process, refusing: its stderr."""
    spec = importlib.util.spec_from_file_location("record_model_figures", SCRIPT)
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main([str(arg) for arg in args]) == 1
    return capsys.readouterr().err


@pytest.fixture
def run_weights(tmp_path: Path) -> Path:
    torch.manual_seed(0)
    model = MobileUNet(MobileUNetConfig(num_classes=4, width=0.35)).eval()
    info = dataclasses.replace(default_info(model.config), provenance={"command": "leanseg train --epochs 2"})
    return save_checkpoint(tmp_path / "run" / "best.safetensors", model, info)


def test_the_copy_keeps_the_weights_and_adds_the_figures_and_where_they_came_from(tmp_path: Path,
                                                                                    run_weights: Path) -> None:
    figures = tmp_path / "figures.json"
    figures.write_text(json.dumps({"heldout_sequence_miou": {"A": {"this_recipe": 0.5}}, "val_fit_miou": 0.8}))
    result = _run(run_weights, tmp_path / "model.safetensors", figures)
    assert result.returncode == 0, result.stderr
    copy = load_checkpoint(tmp_path / "model.safetensors")
    original = load_checkpoint(run_weights)
    for name, tensor in original.model.state_dict().items():
        assert torch.equal(copy.model.state_dict()[name], tensor), name
    assert copy.info.provenance == {"command": "leanseg train --epochs 2",
                                    "heldout_sequence_miou": {"A": {"this_recipe": 0.5}}, "val_fit_miou": 0.8,
                                    "copied_from": {"file": str(run_weights),
                                                    "sha256": hashlib.sha256(run_weights.read_bytes()).hexdigest()}}


def test_the_copy_refuses_the_runs_own_file_a_clashing_key_and_bad_figures(tmp_path: Path, run_weights: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    before = run_weights.read_bytes()
    figures = tmp_path / "figures.json"
    figures.write_text('{"val_fit_miou": 0.8}')
    assert f"{run_weights} is the run's own file" in _refusal(capsys, run_weights, run_weights, figures)
    clash = tmp_path / "clash.json"
    clash.write_text('{"command": "something else"}')
    assert f"{clash}: command already in" in _refusal(capsys, run_weights, tmp_path / "out.safetensors", clash)
    broken = tmp_path / "broken.json"
    broken.write_text('{"val_fit_miou": ')
    assert f"error: {broken}: not a JSON file" in _refusal(capsys, run_weights, tmp_path / "out.safetensors", broken)
    listed = tmp_path / "list.json"
    listed.write_text("[0.8]")
    assert "figures must be a JSON object, got list" in _refusal(capsys, run_weights, tmp_path / "out.safetensors",
                                                                 listed)
    assert not (tmp_path / "out.safetensors").exists() and run_weights.read_bytes() == before
    assert read_info(run_weights).provenance == {"command": "leanseg train --epochs 2"}
