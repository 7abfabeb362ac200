"""The training loop: seeded, resumable at epoch boundaries, best checkpoint by val mIoU."""
from __future__ import annotations

import hashlib
import json
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ..device import bf16_is_fast, resolve_device
from ..io.outputs import atomic_write
from ..jobs.folder_lock import FolderLock
from ..model import build_model
from ..model.checkpoint import CheckpointError, ModelInfo, load_checkpoint, save_checkpoint
from ..model.config import config_to_dict
from .augment import AugmentConfig, augment
from .batches import IMAGENET_MEAN, IMAGENET_STD, to_batch
from .checkpointing import plan_activation_checkpointing
from .copy_paste import paste_rare_classes, rare_classes
from .dataset import DatasetSpec, PairCache, load_spec
from .ema import WeightAverage
from .evaluate import evaluate_model
from .frames import run_frames
from .lean import autocast_for
from .losses import segmentation_loss
from .metrics import iou_per_class, mean_iou
from .options import TrainConfig
from .run_folder import TrainingInterrupted, config_dict, open_run, start_writing
from .state import save_state

Log = Callable[[str], None]


def model_for(config: TrainConfig, spec: DatasetSpec) -> nn.Module:
    return build_model(config.model_config(spec.num_classes))


def class_weights(frequencies: np.ndarray, exponent: float) -> torch.Tensor:
    """(median frequency / frequency) ** exponent; absent classes get weight 0."""
    present = frequencies > 0
    weights = np.zeros_like(frequencies)
    weights[present] = (np.median(frequencies[present]) / frequencies[present]) ** exponent
    return torch.tensor(weights, dtype=torch.float32)


def warmup_fraction(total_steps: int) -> float:
    """The one-cycle schedule's rising share: a tenth of the steps, at least two steps in a short run. Torch's
    OneCycleLR divides by zero when the rise is exactly one step (10 steps at 0.1)."""
    if total_steps >= 20:
        return 0.1
    return 2 / total_steps if total_steps >= 4 else 0.3


@dataclass
class _Saved:
    """What the run folder's last.pt holds so far: where a resume continues, and the run's result."""

    epochs: int  # epochs trained and saved
    best_miou: float = -1.0  # -1: no validation yet
    history: list[dict] = field(default_factory=list)  # one record per saved epoch


def train(config: TrainConfig, *, resume: bool = False, overwrite: bool = False, command: str = "",
          log: Log = print) -> dict:
    """Train to `config.epochs`; returns the history, the best val mIoU and the best checkpoint's path. Killed at
    any point, `resume=True` continues; a folder that holds a run is refused (RunFolderError) unless resumed or
    `overwrite`, and so is one another run is writing (FolderBusyError). Ctrl-C raises TrainingInterrupted,
    which says what to run next; one that comes once the last epoch is saved leaves a complete run, which is
    returned as if none had come."""
    out_dir = Path(config.out_dir)
    with FolderLock(out_dir, on_note=log):  # one writer per run folder, held from the first check to the end
        state = open_run(config, resume=resume, overwrite=overwrite, log=log)  # refusals come before data loads
        saved = _Saved(0) if state is None else _Saved(state["epoch"], state["best_miou"],
                                                        json.loads(state["history"]))
        try:
            return _train(config, state, command, log, saved, overwrite)
        except KeyboardInterrupt:
            if saved.epochs < config.epochs:
                raise TrainingInterrupted(out_dir, saved.epochs, config.epochs, overwrite) from None
        (out_dir / "history.json").write_text(json.dumps(saved.history, indent=1))  # the interrupt may have cut it
    log(f"Ctrl-C after the last epoch ({config.epochs}/{config.epochs}) was saved: the run in {out_dir} is complete")
    return _result(saved, out_dir)


def _class_list(spec: DatasetSpec) -> str:
    """The spec's class names as the loading line shows them: all of a short list, the first five of a long one."""
    names = spec.class_names
    return ", ".join(names) if len(names) <= 6 else ", ".join(names[:5]) + f", ... {names[-1]}"


def _result(saved: _Saved, out_dir: Path) -> dict:
    return {"history": saved.history, "best_miou": saved.best_miou, "best_path": str(out_dir / "best.safetensors")}


def _train(config: TrainConfig, state: dict[str, Any] | None, command: str, log: Log, saved: _Saved,
           overwrite: bool) -> dict:
    """`train` from the checked resume `state` (None: a new run); `saved.epochs` follows each last.pt written."""
    out_dir = Path(config.out_dir)
    device = resolve_device(config.device)
    if config.precision == "bf16" and not bf16_is_fast(device):  # bf16 is the default; where it is slow, say so
        log(f"note: this {device.type.upper()} has no native bf16 convolutions (AVX512-BF16/AMX or a bf16 GPU): "
            "bf16 training runs slower than fp32 here; --precision fp32 is faster")
    spec = load_spec(config.spec_path)
    ignore = spec.ignored
    torch.manual_seed(config.seed)
    model = model_for(config, spec)
    state_path = out_dir / "last.pt"
    parent = _load_initial_weights(model, config, spec) if config.init_from and state is None else None
    model = model.to(device).to(memory_format=torch.channels_last)  # type: ignore[call-overload]
    ema = WeightAverage(model, config.ema_decay) if config.ema_decay else None  # before checkpointing wraps it
    if config.checkpointing:  # the segments a cost model picks for batches of this shape
        shape = (config.batch_size, model.config.in_channels, *config.crop)
        sample = torch.randn(shape, generator=torch.Generator().manual_seed(0))
        sample = sample.to(device).contiguous(memory_format=torch.channels_last)
        log(plan_activation_checkpointing(model, sample).summary())
    train_pairs, val_pairs = run_frames(config, spec, log)
    log(f"loading {len(train_pairs)} training pairs and {len(val_pairs)} validation pairs from {config.data_dir} "
        f"({spec.num_classes} classes of {spec.name or Path(config.spec_path).name}: {_class_list(spec)})")
    train_data = PairCache(train_pairs, spec)
    val_data = PairCache(val_pairs, spec) if val_pairs else None
    start_writing(out_dir, fresh=state is None, overwrite=overwrite, log=log)
    frequencies = train_data.class_frequencies(spec.num_classes)
    weights = class_weights(frequencies, config.class_weighting).to(device)
    rare = rare_classes(frequencies) if config.copy_paste else np.zeros(spec.num_classes, dtype=bool)
    if config.copy_paste:
        log(f"copy-paste (chance {config.copy_paste}) of the rare classes: "
            + ", ".join(name for name, is_rare in zip(spec.class_names, rare) if is_rare))
    steps_per_epoch = max(1, len(train_data) // config.batch_size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=config.lr, total_steps=config.epochs * steps_per_epoch,
        pct_start=warmup_fraction(config.epochs * steps_per_epoch),
    )
    history: list[dict] = []
    best_miou, start_epoch = -1.0, 0
    if state is not None:  # open_run checked its options
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        if ema is not None:
            ema.load_state_dict(state["ema"])
        start_epoch, best_miou, history = saved.epochs, saved.best_miou, list(saved.history)  # `train` read them
        parent = json.loads(state["initial_weights"]) if "initial_weights" in state else None
        state.clear()  # its tensors are in the model and optimiser now: not a second copy for the whole run
        log(f"resuming after epoch {start_epoch}" + (f" (best val mIoU {best_miou:.4f})" if best_miou >= 0 else ""))
    for epoch in range(start_epoch, config.epochs):
        started = time.perf_counter()
        full_size = epoch >= config.epochs - config.finetune_full_epochs
        augment_config = AugmentConfig(crop=config.crop, scale_range=config.scale_range, jitter=config.jitter,
                                       exposure=config.exposure, colour_cast=config.colour_cast)
        if full_size:
            augment_config = replace(augment_config, crop=config.full_crop, scale_range=(1.0, 1.0))
        loss = _train_epoch(model, ema, train_data, optimizer, scheduler, weights, augment_config, config, epoch,
                            ignore, device, rare)
        record: dict[str, Any] = {"epoch": epoch + 1, "loss": loss, "seconds": time.perf_counter() - started,
                                  "crop": list(augment_config.crop)}
        scored = ema.model if ema is not None else model  # the weights that are validated and exported
        if val_data is not None and ((epoch + 1) % config.val_every == 0 or epoch + 1 == config.epochs):
            matrix = evaluate_model(scored, val_data, spec.num_classes, device, config.precision)
            record["val_miou"] = mean_iou(matrix)
            record["val_iou"] = [None if np.isnan(v) else float(v) for v in iou_per_class(matrix)]
        history.append(record)
        line = f"epoch {epoch + 1}/{config.epochs}  loss {loss:.4f}  {record['seconds']:.0f} s"
        if "val_miou" in record:
            line += f"  val mIoU {record['val_miou']:.4f}"
            if record["val_miou"] > best_miou:
                best_miou = record["val_miou"]
                save_checkpoint(out_dir / "best.safetensors", scored,
                                _model_info(config, spec, epoch + 1, best_miou, command, parent))
                line += "  (best, saved)"
        elif val_data is None:  # nothing to select on: the latest weights are the run's result
            save_checkpoint(out_dir / "best.safetensors", scored,
                            _model_info(config, spec, epoch + 1, None, command, parent))
        save_state(state_path, {
            "config": config_dict(config), "epoch": epoch + 1, "best_miou": best_miou,
            "model": model.state_dict(), "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(), "history": json.dumps(history),
            **({"ema": ema.state_dict()} if ema is not None else {}),
            **({"initial_weights": json.dumps(parent)} if parent is not None else {}),
        })
        saved.epochs, saved.best_miou, saved.history = epoch + 1, best_miou, list(history)  # at once: what Ctrl-C finds
        (out_dir / "history.json").write_text(json.dumps(history, indent=1))
        log(line)  # after the state: a printed epoch is one a resume continues from
    return _result(saved, out_dir)


def _load_initial_weights(model: nn.Module, config: TrainConfig, spec: DatasetSpec) -> dict[str, Any]:
    """Load `config.init_from` into `model` (same architecture and classes, else ValueError naming the
    file); returns what the new checkpoint records of it: the file's name and its own provenance."""
    path = Path(config.init_from)
    try:
        parent = load_checkpoint(path)
    except CheckpointError as err:
        raise ValueError(f"--init-from {err}") from err
    wanted = config_to_dict(config.model_config(spec.num_classes))
    if config_to_dict(parent.info.config) != wanted:
        raise ValueError(f"--init-from {path}: its model is {config_to_dict(parent.info.config)}, this run trains "
                         f"{wanted}")
    if tuple(parent.info.class_names) != tuple(spec.class_names):
        raise ValueError(f"--init-from {path}: its classes {list(parent.info.class_names)} are not the dataset's "
                         f"{list(spec.class_names)}")
    model.load_state_dict(parent.model.state_dict())
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return {"file": str(path), "sha256": digest, "provenance": parent.info.provenance}


def _train_epoch(model: nn.Module, ema: WeightAverage | None, data: PairCache, optimizer: torch.optim.Optimizer,
                 scheduler: torch.optim.lr_scheduler.LRScheduler, weights: torch.Tensor, augment_config: AugmentConfig,
                 config: TrainConfig, epoch: int, ignore: int, device: torch.device, rare: np.ndarray) -> float:
    from ..commands.progress import ProgressBar

    rng = np.random.default_rng([config.seed, epoch])
    torch.manual_seed(config.seed * 100_003 + epoch)
    order = rng.permutation(len(data))
    steps = max(1, len(data) // config.batch_size)
    bar = ProgressBar(steps * config.batch_size, f"epoch {epoch + 1}/{config.epochs}", unit="img", stream=sys.stderr)
    model.train()
    total = 0.0
    try:
        for step in range(steps):
            batch = [augment(data.images[i], data.labels[i], augment_config, rng, ignore)
                     for i in order[step * config.batch_size : (step + 1) * config.batch_size]]
            batch = paste_rare_classes(batch, rare, config.copy_paste, rng)
            x = to_batch([b[0] for b in batch], device)
            y = torch.from_numpy(np.stack([b[1] for b in batch])).to(device).long()
            with autocast_for(device, config.precision):
                logits = model(x)
            loss = segmentation_loss(logits, y, class_weights=weights, ignore_index=ignore,
                                     label_smoothing=config.label_smoothing, lovasz_weight=config.lovasz_weight,
                                     hardest_fraction=config.ohem_fraction)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            scheduler.step()
            if ema is not None:
                ema.update(model)
            total += loss.item()
            bar.update(len(batch), postfix=f"loss {total / (step + 1):.4f}")
    finally:  # Ctrl-C too: a terminal's bar stops, so what follows prints below it
        bar.close()
    return total / steps


def _model_info(config: TrainConfig, spec: DatasetSpec, epochs: int, miou: float | None, command: str,
                parent: dict[str, Any] | None) -> ModelInfo:
    return ModelInfo(
        config=config.model_config(spec.num_classes), class_names=spec.class_names, class_colours=spec.class_colours,
        mean=IMAGENET_MEAN, std=IMAGENET_STD, ignore_index=spec.ignored,
        provenance={"data": spec.name or config.data_dir, "split": "+".join(config.train_splits),
                    "holdout_sequence": config.holdout_sequence, "selected_on": _selected_on(config),
                    "command": command, "epochs": epochs, "of_epochs": config.epochs,
                    "val_miou": None if miou is None else round(miou, 4), "ema": bool(config.ema_decay),
                    "train_config": config_dict(config),
                    **({"initial_weights": parent} if parent is not None else {})},
    )


def _selected_on(config: TrainConfig) -> str:
    if config.holdout_sequence:
        return f"sequence {config.holdout_sequence}"
    return config.val_split or "none (last epoch)"


def export_best(out_dir: str | Path, target: str | Path) -> Path:
    """Copy the run's best checkpoint to `target` (e.g. assets/models/...), atomically: a copy cut short leaves
    no partial file. OutputPathError when `target` cannot be written; OSError when the checkpoint cannot be read."""
    with open(Path(out_dir) / "best.safetensors", "rb") as source:
        return atomic_write(target, lambda handle: shutil.copyfileobj(source, handle))
