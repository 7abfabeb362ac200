"""A training run's folder: what it holds, and whether a new `leanseg train` may write there. A run is never
overwritten without --overwrite, and --resume continues only the run its options started; both are checked
before any data loads."""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..io.outputs import make_folder
from .options import TrainConfig
from .state import load_state

RUN_FILES = ("last.pt", "best.safetensors", "history.json")  # what a run writes: resume state, weights, log
LOCATIONS = ("data_dir", "spec_path", "out_dir", "init_from")  # TrainConfig fields a resume may change
# (init_from: the starting weights are in the resume state by then)
FLAGS = {"ema_decay": "--ema", "lovasz_weight": "--lovasz", "ohem_fraction": "--ohem"}  # the rest: --field-name


class RunFolderError(ValueError):
    """A run folder this command must not write to (or cannot continue); the message names it and the fix."""


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C before the last epoch was saved (after it, the run is complete); the message says what last.pt
    holds and how to go on."""

    def __init__(self, out_dir: Path, saved_epochs: int, epochs: int, overwrite: bool = False) -> None:
        resume = "--resume in place of --overwrite" if overwrite else "--resume"
        if saved_epochs == 0:
            note = (f"interrupted before epoch 1/{epochs} finished: nothing saved yet; "
                    "run the same command to start again")
        else:
            held = "epoch 1" if saved_epochs == 1 else f"epochs 1-{saved_epochs}"
            note = (f"interrupted in epoch {saved_epochs + 1}/{epochs}: run the same command with {resume} to "
                    f"continue from epoch {saved_epochs + 1} ({out_dir / 'last.pt'} holds {held})")
        super().__init__(note)


def config_dict(config: TrainConfig) -> dict:
    """`config` as plain JSON values (tuples become lists), as a resume state stores it."""
    return json.loads(json.dumps(asdict(config)))


def open_run(config: TrainConfig, *, resume: bool, overwrite: bool, log: Callable[[str], None]) -> dict | None:
    """The resume state to continue from, or None for a new run; RunFolderError (writing nothing: the folder lock
    that `train` holds removes the folders it made) when the folder holds a run that neither --resume nor
    --overwrite allows, or one started with other options."""
    out_dir = Path(config.out_dir)
    state_path = out_dir / "last.pt"
    if resume and state_path.is_file():
        state = load_state(state_path)
        _check_same_run(state, config, state_path)
        return state
    held = [name for name in RUN_FILES if (out_dir / name).is_file()]
    if held and not overwrite:
        if resume:
            raise RunFolderError(f"{out_dir} holds {', '.join(held)} but no last.pt to resume from; pass "
                                 "--overwrite to start over, or choose another --out")
        raise RunFolderError(f"{out_dir} already holds a run ({', '.join(held)}{_epochs_done(out_dir)}); pass "
                             "--resume to continue it or --overwrite to start over")
    if resume:
        log(f"nothing to resume in {out_dir} (no last.pt); starting a new run")
    return None


def start_writing(out_dir: Path, fresh: bool, overwrite: bool, log: Callable[[str], None]) -> None:
    """Make sure `out_dir` exists (the folder lock made it; one that writes nothing is removed) and clear what a
    killed run left; `fresh` (a new run): remove a previous run's files first where `overwrite` allows it, else refuse
    (RunFolderError) a run that appeared there since `open_run` looked, while this one loaded its data."""
    make_folder(out_dir)
    for stale in out_dir.glob(".*.tmp"):  # left by a run killed while writing; the real files are intact
        stale.unlink()
    if not fresh:
        return
    held = [name for name in RUN_FILES if (out_dir / name).is_file()]
    if held and not overwrite:
        raise RunFolderError(f"{out_dir} holds {', '.join(held)} written while this run loaded its data; "
                             "choose another --out")
    removed = held
    for name in removed:
        (out_dir / name).unlink()
    if removed:
        log(f"--overwrite: removed the previous run's {', '.join(removed)} from {out_dir}")


def _epochs_done(out_dir: Path) -> str:
    """', N epochs trained' from its history.json, or '' when it cannot tell."""
    try:
        history = json.loads((out_dir / "history.json").read_text())
    except (OSError, ValueError):
        return ""
    return f", {len(history)} epoch{'s' if len(history) != 1 else ''} trained" if isinstance(history, list) else ""


def _check_same_run(state: dict[str, Any], config: TrainConfig, state_path: Path) -> None:
    """RunFolderError naming each option that differs from the run's (`state`), and a mismatched --init-from."""
    stored = _training_options({**config_dict(TrainConfig(data_dir="", spec_path="", out_dir="")), **state["config"]})
    given = _training_options(config_dict(config))
    keys = list(given) + [key for key in stored if key not in given]  # in TrainConfig's order
    differing = [f"{_flag(key)} {_value(key, stored.get(key))}, not {_value(key, given.get(key))}"
                 for key in keys if stored.get(key) != given.get(key)]
    if differing:
        raise RunFolderError(f"{state_path}: this run was started with other options: {'; '.join(differing)}; "
                             "resume with the same ones, or pass --overwrite to start over")
    started_with = "initial_weights" in state
    if bool(config.init_from) != started_with:
        raise RunFolderError(f"{state_path}: this run was started {'with' if started_with else 'without'} "
                             "--init-from; resume it the same way")


def _training_options(config: dict) -> dict:
    """The options a resume must repeat: all but where the data, spec, run folder and --init-from checkpoint
    live (its weights are in the state by then), so a committed last.pt continues in another checkout."""
    return {key: value for key, value in config.items() if key not in LOCATIONS}


def _flag(key: str) -> str:
    return FLAGS.get(key, "--" + key.replace("_", "-"))


def _value(key: str, value: Any) -> str:
    """An option's value as it is written on the command line: 0.01, 32 32, train,val, on/off, none."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, list):
        return ("," if key == "train_splits" else " ").join(str(v) for v in value) or "none"
    if value is None or value == "":
        return "none"
    return str(value)
