"""`leanseg train` at its boundaries: where it may write, what a run folder already holds, what a resume
differs in, missing data, and Ctrl-C; each refusal one line, exit 2, before any work and creating nothing."""
from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from .refusals import assert_one_line_refusal
from .test_train import make_dataset, train_args
from .unwritable import make_unwritable


def leanseg_train(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=600)


def assert_refused(result: subprocess.CompletedProcess, *wording: str) -> None:
    """A one-line refusal (exit 2) holding each of `wording`, before any frame loaded."""
    assert_one_line_refusal(result, *wording)
    assert "loading" not in result.stdout


def test_an_out_that_cannot_hold_a_run_is_refused_before_any_work(tmp_path: Path) -> None:
    data = make_dataset(tmp_path / "data", train=2, val=1)
    afile = tmp_path / "afile"
    afile.write_text("notes")
    assert_refused(leanseg_train(train_args(data, afile, epochs=1)), f"--out {afile}", "it is a file")
    assert_refused(leanseg_train(train_args(data, afile / "run", epochs=1)), f"{afile} is a file")
    export = afile / "m.safetensors"  # --export too: refused now, not after the training
    assert_refused(leanseg_train(train_args(data, tmp_path / "run", epochs=1) + ["--export", str(export)]),
                   f"--export {export}: {afile}: cannot write the output folder (it is a file")
    assert_refused(leanseg_train(train_args(data, tmp_path / "run", epochs=1) + ["--export", str(data)]),
                   f"--export {data} is a folder; give a file name such as {data / 'model.safetensors'}")
    assert afile.read_text() == "notes" and not (tmp_path / "run").exists()

    locked = tmp_path / "locked"
    locked.mkdir()
    undo = make_unwritable(locked)
    try:
        assert_refused(leanseg_train(train_args(data, locked / "run", epochs=1)), str(locked))
    finally:
        undo()
    assert list(locked.iterdir()) == []


def test_a_folder_that_holds_a_run_is_refused_unless_resumed_or_overwritten(tmp_path: Path) -> None:
    data = make_dataset(tmp_path / "data", train=2, val=1)
    run = tmp_path / "run"
    first = leanseg_train(train_args(data, run, epochs=1))
    assert first.returncode == 0, first.stderr
    held = {name: (run / name).read_bytes() for name in ("last.pt", "best.safetensors", "history.json")}

    again = leanseg_train(train_args(data, run, epochs=1))
    assert_refused(again, f"{run} already holds a run (last.pt, best.safetensors, history.json, 1 epoch trained)",
                   "pass --resume to continue it or --overwrite to start over")
    assert {name: (run / name).read_bytes() for name in held} == held

    both = leanseg_train(train_args(data, run, epochs=1) + ["--resume", "--overwrite"])
    assert both.returncode == 2 and "not allowed with argument" in both.stderr

    (run / "last.pt").unlink()  # weights and history but nothing to resume from: not started over quietly
    assert_refused(leanseg_train(train_args(data, run, epochs=1) + ["--resume"]),
                   f"{run} holds best.safetensors, history.json but no last.pt", "--overwrite")

    over = leanseg_train(train_args(data, run, epochs=1) + ["--overwrite"])
    assert over.returncode == 0, over.stderr
    assert "removed the previous run's best.safetensors, history.json" in over.stdout
    assert torch.load(run / "last.pt", weights_only=True)["epoch"] == 1


def test_a_run_folder_another_training_writes_is_refused_and_taken_over_once_it_is_killed(tmp_path: Path) -> None:
    """While one `leanseg train` runs in a folder, a second one there (new, --resume or --overwrite) is refused
    naming the first's pid, and the first's files are untouched; once the first is SIGKILLed, --resume goes on."""
    data = make_dataset(tmp_path / "data", train=2, val=1)
    run = tmp_path / "run"
    first = subprocess.Popen(train_args(data, run, epochs=20), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True)
    try:
        assert first.stdout is not None
        for line in first.stdout:
            if line.startswith("epoch 2/"):  # epoch 1 is saved in last.pt: a run worth protecting
                break
        first.send_signal(signal.SIGSTOP)  # still holding its folder, but no epoch ends while files are compared
        held = {path.name: path.read_bytes() for path in run.iterdir()}
        for extra in ([], ["--resume"], ["--overwrite"]):
            assert_refused(leanseg_train(train_args(data, run, epochs=20) + extra),
                           f"{run} is being written by another leanseg run (pid {first.pid} on")
        assert {path.name: path.read_bytes() for path in run.iterdir()} == held
    finally:
        first.kill()
        first.wait(timeout=60)
    assert first.returncode == -signal.SIGKILL
    epochs = torch.load(run / "last.pt", weights_only=True)["epoch"]
    resumed = leanseg_train(train_args(data, run, epochs=20) + ["--resume"])
    assert resumed.returncode == 0, resumed.stderr
    assert f"taking over {run / '.leanseg.lock'}: the run that left it (pid {first.pid}" in resumed.stdout
    assert f"resuming after epoch {epochs}" in resumed.stdout and not (run / ".leanseg.lock").exists()


def test_a_resume_with_other_options_names_each_one_before_the_data_loads(tmp_path: Path) -> None:
    data = make_dataset(tmp_path / "data", train=2, val=1)
    run = tmp_path / "run"
    first = leanseg_train(train_args(data, run, epochs=1) + ["--checkpointing"])
    assert first.returncode == 0, first.stderr
    args = train_args(data, run, epochs=1)
    args[args.index("--lr") + 1] = "0.001"
    args[args.index("--crop") + 1 : args.index("--crop") + 3] = ["40", "48"]
    refused = leanseg_train(args + ["--train-splits", "train,val", "--resume"])
    assert_refused(refused, f"{run / 'last.pt'}: this run was started with other options",
                   "--crop 32 32, not 40 48", "--lr 0.01, not 0.001", "--checkpointing on, not off",
                   "--train-splits train, not train,val")


def test_resume_with_nothing_to_resume_says_so_and_starts_a_new_run(tmp_path: Path) -> None:
    data = make_dataset(tmp_path / "data", train=2, val=1)
    run = tmp_path / "run"
    result = leanseg_train(train_args(data, run, epochs=1) + ["--resume"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"nothing to resume in {run} (no last.pt); starting a new run\n")
    assert (run / "last.pt").is_file()


def test_data_that_cannot_be_used_is_named_and_nothing_is_created(tmp_path: Path) -> None:
    run = tmp_path / "rb1"
    data = make_dataset(tmp_path / "data", train=2, val=1)
    (tmp_path / "afile").write_text("")
    for where, wording in (("nope", "does not exist"), ("afile", "is a file, not a folder")):
        args = train_args(tmp_path / where, run, epochs=1)
        args[args.index("--spec") + 1] = str(data / "spec.json")
        assert_refused(leanseg_train(args), f"data folder {tmp_path / where} {wording}")
    assert_refused(leanseg_train(train_args(data, run, epochs=1) + ["--val-split", "tset"]),
                   "no 'tset' split", "splits there: train, val (or --val-split none to train without validation)")
    cv2.imwrite(str(data / "train" / "labels" / "f01.png"), np.zeros((30, 40), np.uint8))
    refused = leanseg_train(train_args(data, run, epochs=1))
    assert refused.returncode == 2
    assert (f"label {data / 'train' / 'labels' / 'f01.png'} is 40x30 px (width x height), its image "
            f"{data / 'train' / 'images' / 'f01.png'} 48x48 px") in refused.stderr
    assert not run.exists()


def test_ctrl_c_says_what_last_pt_holds_and_how_to_continue(tmp_path: Path) -> None:
    data = make_dataset(tmp_path / "data", train=6, val=1)
    run = tmp_path / "run"
    args = train_args(data, run, epochs=5)
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("epoch 1/5"):
            proc.send_signal(signal.SIGINT)
            break
    _, stderr = proc.communicate(timeout=120)
    if proc.returncode == 0:
        pytest.skip("the run finished before Ctrl-C arrived")
    assert proc.returncode == 130, stderr
    saved = torch.load(run / "last.pt", weights_only=True)["epoch"]
    held = "epoch 1" if saved == 1 else f"epochs 1-{saved}"
    assert (f"interrupted in epoch {saved + 1}/5: run the same command with --resume to continue from epoch "
            f"{saved + 1} ({run / 'last.pt'} holds {held})") in stderr
    assert "Traceback" not in stderr

    resumed = leanseg_train(args + ["--resume"])
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming after epoch {saved}" in resumed.stdout


def test_every_short_run_has_a_one_cycle_schedule_torch_can_step() -> None:
    """Torch's OneCycleLR divided by zero at exactly 10 steps (5 epochs of 4 images at batch 2) with a warm-up
    of a tenth; the schedule `train` builds steps to its end at any length, rises and falls."""
    from leanseg.core.train.loop import warmup_fraction

    for total in range(1, 60):
        optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=0.01)
        schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.01, total_steps=total,
                                                       pct_start=warmup_fraction(total))
        rates = []
        for _ in range(total):
            rates.append(schedule.get_last_lr()[0])
            optimizer.step()
            schedule.step()
        assert max(rates) <= 0.01 and (total < 3 or rates[-1] < max(rates)), (total, rates)
    assert warmup_fraction(1000) == 0.1  # long runs (the shipped recipe's) keep a tenth


def test_a_run_that_appears_while_the_data_loads_is_never_removed_without_overwrite(tmp_path: Path) -> None:
    """`open_run` found the folder empty; by the time the data has loaded another run wrote there: a new run
    without --overwrite refuses rather than delete it, and with --overwrite it says what it removed."""
    from leanseg.core.train.run_folder import RunFolderError, start_writing

    run = tmp_path / "run"
    run.mkdir()
    (run / "last.pt").write_bytes(b"another run's state")
    with pytest.raises(RunFolderError, match="written while this run loaded its data"):
        start_writing(run, fresh=True, overwrite=False, log=print)
    assert (run / "last.pt").read_bytes() == b"another run's state"
    said: list[str] = []
    start_writing(run, fresh=True, overwrite=True, log=said.append)
    assert not (run / "last.pt").exists() and said == [f"--overwrite: removed the previous run's last.pt from {run}"]


def test_ctrl_c_in_an_overwriting_run_says_resume_in_place_of_overwrite(tmp_path: Path) -> None:
    from leanseg.core.train.run_folder import TrainingInterrupted

    note = str(TrainingInterrupted(tmp_path, saved_epochs=2, epochs=5, overwrite=True))
    assert "run the same command with --resume in place of --overwrite to continue from epoch 3" in note
    assert "with --resume to" in str(TrainingInterrupted(tmp_path, saved_epochs=2, epochs=5))


class _CtrlCOnLines(io.StringIO):
    """stdout that sends this process a real SIGINT as a line starting with one of `prefixes` is printed."""

    def __init__(self, prefixes: tuple[str, ...]) -> None:
        super().__init__()
        self.prefixes, self.sent = prefixes, 0

    def write(self, text: str) -> int:
        written = super().write(text)
        if text.startswith(self.prefixes):
            self.sent += 1
            signal.raise_signal(signal.SIGINT)
        return written


def test_ctrl_c_once_the_last_epoch_is_saved_still_exports(tmp_path: Path, one_torch_thread: None,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Real SIGINTs, in this process at set points: one as the last epoch's line prints (its last.pt is saved)
    leaves a complete run, and one during the summary is ignored; --export is written, exit code 0."""
    from leanseg.core.cli import main

    data = make_dataset(tmp_path / "data", train=2, val=1)
    run, export = tmp_path / "run", tmp_path / "models" / "net.safetensors"
    stdout = _CtrlCOnLines(("epoch 2/2", "best val mIoU"))
    monkeypatch.setattr(sys, "stdout", stdout)
    before = signal.getsignal(signal.SIGINT)
    assert main(train_args(data, run, epochs=2)[3:] + ["--export", str(export)]) == 0
    printed = stdout.getvalue()
    assert stdout.sent == 2, printed
    assert f"Ctrl-C after the last epoch (2/2) was saved: the run in {run} is complete" in printed
    assert f"exported to {export}" in printed
    assert export.read_bytes() == (run / "best.safetensors").read_bytes()
    assert len(json.loads((run / "history.json").read_text())) == 2
    assert signal.getsignal(signal.SIGINT) is before
