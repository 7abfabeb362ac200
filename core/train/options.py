"""Training configuration: one frozen dataclass, validated, stored in the checkpoint's provenance."""
from __future__ import annotations

from dataclasses import dataclass

PRECISIONS = ("fp32", "bf16", "fp16")
MODEL_KINDS = ("MobileUNet", "PlainUNet")


@dataclass(frozen=True)
class TrainConfig:
    data_dir: str  # folder with list files (CamVid's train.txt) or split/images + split/labels
    spec_path: str  # dataset spec JSON: class names, colours, ignore index
    out_dir: str  # run folder: last.pt (resume state), best.safetensors, history.json
    model: str = "MobileUNet"  # MobileUNet | PlainUNet
    width: float = 0.75  # MobileUNet width multiplier (PlainUNet: base channels = 32 * width)
    epochs: int = 80  # full passes over the training split
    batch_size: int = 8  # crops per optimiser step
    crop: tuple[int, int] = (256, 320)  # training crop (height, width)
    lr: float = 3e-3  # peak learning rate of the one-cycle schedule (AdamW)
    weight_decay: float = 1e-4  # AdamW weight decay
    class_weighting: float = 0.5  # exponent on median-frequency class weights (0: unweighted)
    precision: str = "bf16"  # fp32 | bf16 (CPU or CUDA autocast) | fp16 (CUDA only)
    checkpointing: bool = False  # recompute each block's activations in backward (less memory)
    seed: int = 0  # everything random derives from it: same seed, same run
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    val_every: int = 1  # evaluate on the val split every N epochs (and at the last)
    limit_images: int = 0  # use only the first N training images (0: all); for smoke tests

    def __post_init__(self) -> None:
        if self.model not in MODEL_KINDS:
            raise ValueError(f"unknown model {self.model!r}; valid: {', '.join(MODEL_KINDS)}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"unknown precision {self.precision!r}; valid: {', '.join(PRECISIONS)}")
        if self.epochs < 1 or self.batch_size < 1 or self.val_every < 1:
            raise ValueError("epochs, batch_size and val_every must be >= 1")
        if self.lr <= 0:
            raise ValueError(f"lr must be positive, got {self.lr}")
        object.__setattr__(self, "crop", tuple(self.crop))
