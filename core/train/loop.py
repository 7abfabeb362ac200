"""The training loop: seeded, resumable at epoch boundaries, best checkpoint by val mIoU."""
from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..device import resolve_device
from ..model import MobileUNetConfig, PlainUNetConfig, build_model
from ..model.checkpoint import ModelInfo, save_checkpoint
from .augment import AugmentConfig, augment
from .checkpointing import plan_activation_checkpointing
from .dataset import DatasetSpec, PairCache, find_pairs, load_spec
from .evaluate import evaluate_model
from .lean import autocast_for
from .metrics import iou_per_class, mean_iou
from .options import TrainConfig
from .state import load_state, save_state

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
Log = Callable[[str], None]


def model_for(config: TrainConfig, spec: DatasetSpec) -> nn.Module:
    if config.model == "MobileUNet":
        return build_model(MobileUNetConfig(num_classes=spec.num_classes, width=config.width))
    return build_model(PlainUNetConfig(num_classes=spec.num_classes, base_channels=max(8, round(32 * config.width))))


def class_weights(frequencies: np.ndarray, exponent: float) -> torch.Tensor:
    """(median frequency / frequency) ** exponent; absent classes get weight 0."""
    present = frequencies > 0
    weights = np.zeros_like(frequencies)
    weights[present] = (np.median(frequencies[present]) / frequencies[present]) ** exponent
    return torch.tensor(weights, dtype=torch.float32)


def to_batch(images: list[np.ndarray], device: torch.device) -> torch.Tensor:
    """list of (H, W, 3) uint8 -> (B, 3, H, W) float normalised, channels_last."""
    x = torch.from_numpy(np.stack(images)).to(device).permute(0, 3, 1, 2).float().div_(255)
    mean = torch.tensor(IMAGENET_MEAN, device=device).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD, device=device).view(1, 3, 1, 1)
    return ((x - mean) / std).contiguous(memory_format=torch.channels_last)


def train(config: TrainConfig, *, resume: bool = False, command: str = "", log: Log = print) -> dict:
    """Train to `config.epochs`; returns the history. Killed at any point, `resume=True` continues."""
    out_dir = Path(config.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob(".*.tmp"):  # left by a run killed while writing; the real files are intact
        stale.unlink()
    device = resolve_device(config.device)
    spec = load_spec(config.spec_path)
    ignore = spec.ignore_index if spec.ignore_index is not None else 255
    torch.manual_seed(config.seed)
    model = model_for(config, spec).to(device).to(memory_format=torch.channels_last)  # type: ignore[call-overload]
    if config.checkpointing:  # the segments a cost model picks for batches of this shape
        shape = (config.batch_size, model.config.in_channels, *config.crop)
        sample = torch.randn(shape, generator=torch.Generator().manual_seed(0))
        sample = sample.to(device).contiguous(memory_format=torch.channels_last)
        log(plan_activation_checkpointing(model, sample).summary())
    train_pairs = find_pairs(config.data_dir, "train", spec)
    if config.limit_images:
        train_pairs = train_pairs[: config.limit_images]
    log(f"loading {len(train_pairs)} training pairs from {config.data_dir}")
    train_data = PairCache(train_pairs)
    val_data = PairCache(find_pairs(config.data_dir, "val", spec))
    weights = class_weights(train_data.class_frequencies(spec.num_classes), config.class_weighting).to(device)
    steps_per_epoch = max(1, len(train_data) // config.batch_size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=config.lr, total_steps=config.epochs * steps_per_epoch, pct_start=0.1
    )
    history: list[dict] = []
    best_miou, start_epoch = -1.0, 0
    state_path = out_dir / "last.pt"
    if resume and state_path.is_file():
        state = load_state(state_path)
        if state["config"] != _config_dict(config):
            raise ValueError(f"{state_path}: this run was started with other options; resume with the same ones")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        start_epoch, best_miou, history = state["epoch"], state["best_miou"], json.loads(state["history"])
        log(f"resuming after epoch {start_epoch} (best val mIoU {best_miou:.4f})")
    augment_config = AugmentConfig(crop=config.crop)
    for epoch in range(start_epoch, config.epochs):
        started = time.perf_counter()
        loss = _train_epoch(model, train_data, optimizer, scheduler, weights, augment_config, config, epoch,
                            ignore, device)
        record: dict[str, Any] = {"epoch": epoch + 1, "loss": loss, "seconds": time.perf_counter() - started}
        if (epoch + 1) % config.val_every == 0 or epoch + 1 == config.epochs:
            matrix = evaluate_model(model, val_data, spec.num_classes, device, config.precision)
            record["val_miou"] = mean_iou(matrix)
            record["val_iou"] = [None if np.isnan(v) else float(v) for v in iou_per_class(matrix)]
        history.append(record)
        line = f"epoch {epoch + 1}/{config.epochs}  loss {loss:.4f}  {record['seconds']:.0f} s"
        if "val_miou" in record:
            line += f"  val mIoU {record['val_miou']:.4f}"
            if record["val_miou"] > best_miou:
                best_miou = record["val_miou"]
                info = _model_info(config, spec, epoch + 1, best_miou, command)
                save_checkpoint(out_dir / "best.safetensors", model, info)
                line += "  (best, saved)"
        log(line)
        save_state(state_path, {
            "config": _config_dict(config), "epoch": epoch + 1, "best_miou": best_miou,
            "model": model.state_dict(), "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(), "history": json.dumps(history),
        })
        (out_dir / "history.json").write_text(json.dumps(history, indent=1))
    return {"history": history, "best_miou": best_miou, "best_path": str(out_dir / "best.safetensors")}


def _train_epoch(model: nn.Module, data: PairCache, optimizer: torch.optim.Optimizer,
                 scheduler: torch.optim.lr_scheduler.LRScheduler, weights: torch.Tensor, augment_config: AugmentConfig,
                 config: TrainConfig, epoch: int, ignore: int, device: torch.device) -> float:
    from ..commands.progress import ProgressBar

    rng = np.random.default_rng([config.seed, epoch])
    torch.manual_seed(config.seed * 100_003 + epoch)
    order = rng.permutation(len(data))
    steps = max(1, len(data) // config.batch_size)
    bar = ProgressBar(steps * config.batch_size, f"epoch {epoch + 1}/{config.epochs}", unit="img", stream=sys.stderr)
    model.train()
    total = 0.0
    for step in range(steps):
        batch = [augment(data.images[i], data.labels[i], augment_config, rng, ignore)
                 for i in order[step * config.batch_size : (step + 1) * config.batch_size]]
        x = to_batch([b[0] for b in batch], device)
        y = torch.from_numpy(np.stack([b[1] for b in batch])).to(device).long()
        with autocast_for(device, config.precision):
            logits = model(x)
        loss = F.cross_entropy(logits.float(), y, weight=weights, ignore_index=ignore)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        scheduler.step()
        total += loss.item()
        bar.update(len(batch), postfix=f"loss {total / (step + 1):.4f}")
    bar.close()
    return total / steps


def _config_dict(config: TrainConfig) -> dict:
    return json.loads(json.dumps(asdict(config)))


def _model_info(config: TrainConfig, spec: DatasetSpec, epochs: int, miou: float, command: str) -> ModelInfo:
    model_config = (MobileUNetConfig(num_classes=spec.num_classes, width=config.width) if config.model == "MobileUNet"
                    else PlainUNetConfig(num_classes=spec.num_classes, base_channels=max(8, round(32 * config.width))))
    return ModelInfo(
        config=model_config, class_names=spec.class_names, class_colours=spec.class_colours,
        mean=IMAGENET_MEAN, std=IMAGENET_STD, ignore_index=spec.ignore_index,
        provenance={"data": spec.name or config.data_dir, "split": "train", "selected_on": "val",
                    "command": command, "epochs": epochs, "of_epochs": config.epochs, "val_miou": round(miou, 4),
                    "train_config": _config_dict(config)},
    )


def export_best(out_dir: str | Path, target: str | Path) -> Path:
    """Copy the run's best checkpoint to `target` (e.g. assets/models/...)."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(Path(out_dir) / "best.safetensors", target)
    return target
