"""Training configuration: one frozen dataclass, validated, stored in the checkpoint's provenance."""
from __future__ import annotations

from dataclasses import dataclass

from ..model.config import MobileUNetConfig, PlainUNetConfig

PRECISIONS = ("fp32", "bf16", "fp16")
MODEL_KINDS = ("MobileUNet", "PlainUNet")


@dataclass(frozen=True)
class TrainConfig:
    data_dir: str  # folder with list files (CamVid's train.txt) or split/images + split/labels
    spec_path: str  # dataset spec JSON: class names, colours, ignore index
    out_dir: str  # run folder: last.pt (resume state), best.safetensors, history.json
    model: str = "MobileUNet"  # MobileUNet | PlainUNet
    width: float = 0.75  # MobileUNet width multiplier (PlainUNet: base channels = 32 * width)
    decoder_channels: tuple[int, ...] = ()  # MobileUNet decoder channels at strides 16, 8, 4, 2; () = its default
    context_dilations: tuple[int, ...] = ()  # MobileUNet dilated inverted residuals at stride 32; () = none
    epochs: int = 80  # full passes over the training frames, the full-size phase included
    batch_size: int = 8  # crops per optimiser step
    crop: tuple[int, int] = (256, 320)  # training crop (height, width)
    lr: float = 3e-3  # peak learning rate of the one-cycle schedule (AdamW)
    weight_decay: float = 1e-4  # AdamW weight decay
    class_weighting: float = 0.5  # exponent on median-frequency class weights (0: unweighted)
    precision: str = "bf16"  # fp32 | bf16 (CPU or CUDA autocast) | fp16 (CUDA only)
    checkpointing: bool = False  # recompute each block's activations in backward (less memory)
    seed: int = 0  # everything random derives from it: same seed, same run
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    val_every: int = 1  # evaluate on the validation frames every N epochs (and at the last)
    limit_images: int = 0  # use only the first N training images (0: all); for smoke tests
    train_splits: tuple[str, ...] = ("train",)  # splits whose frames are trained on (e.g. train, val)
    val_split: str = "val"  # split that picks the best epoch; "" = none (the last epoch is kept)
    holdout_sequence: str = ""  # frames of this sequence (name prefix before "_") leave the training
    # frames and become the validation frames instead of `val_split`; "" = no held-out sequence
    scale_range: tuple[float, float] = (0.6, 1.4)  # random rescale before cropping
    jitter: float = 0.25  # brightness/contrast/saturation jitter amplitude (0 = off)
    exposure: tuple[float, float] = (0.0, 0.0)  # exposure change in stops, uniform in [low, high] (0 0 = off)
    colour_cast: float = 0.0  # per-channel gain in [1 - colour_cast, 1 + colour_cast] (0 = off)
    copy_paste: float = 0.0  # chance that a crop takes the rare classes' pixels of another crop of its batch (0 = off)
    ema_decay: float = 0.0  # exponential moving average of the weights (e.g. 0.998); the EMA
    # weights are validated and exported; 0 = off
    label_smoothing: float = 0.0  # cross-entropy label smoothing (0 = off)
    lovasz_weight: float = 0.0  # weight of the Lovász-softmax loss added to the cross-entropy (0 = off)
    ohem_fraction: float = 1.0  # the cross-entropy is averaged over this hardest share of the labelled pixels
    # of each batch (online hard example mining); 1 = all of them
    finetune_full_epochs: int = 0  # the last N of `epochs` train on `full_crop` crops at scale 1
    full_crop: tuple[int, int] = (360, 480)  # crop of the full-size phase (CamVid's frame size)
    init_from: str = ""  # a leanseg .safetensors checkpoint of the same model to start from (a second
    # schedule after a finished run); "" = random initial weights from `seed`

    def __post_init__(self) -> None:
        if self.model not in MODEL_KINDS:
            raise ValueError(f"unknown model {self.model!r}; valid: {', '.join(MODEL_KINDS)}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"unknown precision {self.precision!r}; valid: {', '.join(PRECISIONS)}")
        if self.epochs < 1 or self.batch_size < 1 or self.val_every < 1:
            raise ValueError("epochs, batch_size and val_every must be >= 1")
        if self.lr <= 0:
            raise ValueError(f"lr must be positive, got {self.lr}")
        if not self.train_splits:
            raise ValueError("train_splits must name at least one split, e.g. train or train,val")
        if not 0 < self.scale_range[0] <= self.scale_range[1]:
            raise ValueError(f"scale_range must be 0 < low <= high, got {self.scale_range}")
        check_photometric(self.exposure, self.colour_cast)
        if not 0.0 <= self.copy_paste <= 1.0:
            raise ValueError(f"copy_paste must be a chance in [0, 1], got {self.copy_paste}")
        if not 0.0 <= self.ema_decay < 1.0:
            raise ValueError(f"ema_decay must be in [0, 1), got {self.ema_decay}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), got {self.label_smoothing}")
        if self.lovasz_weight < 0:
            raise ValueError(f"lovasz_weight must be >= 0, got {self.lovasz_weight}")
        if not 0.0 < self.ohem_fraction <= 1.0:
            raise ValueError(f"ohem_fraction must be in (0, 1], got {self.ohem_fraction}")
        if not 0 <= self.finetune_full_epochs <= self.epochs:
            raise ValueError(f"finetune_full_epochs must be in 0..epochs ({self.epochs}), got "
                             f"{self.finetune_full_epochs}")
        for option in ("decoder_channels", "context_dilations"):
            if getattr(self, option) and self.model != "MobileUNet":
                raise ValueError(f"{option} is a MobileUNet option, not {self.model}'s")
        for name in ("crop", "train_splits", "scale_range", "full_crop", "exposure", "decoder_channels",
                     "context_dilations"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        self.model_config()  # a bad width, decoder or dilation is named now, not after the frames have loaded

    def model_config(self, num_classes: int = MobileUNetConfig.num_classes) -> MobileUNetConfig | PlainUNetConfig:
        """The network this run trains, for a dataset of num_classes classes."""
        if self.model == "MobileUNet":
            decoder = self.decoder_channels or MobileUNetConfig.decoder_channels
            return MobileUNetConfig(num_classes=num_classes, width=self.width, decoder_channels=decoder,
                                    context_dilations=self.context_dilations)
        return PlainUNetConfig(num_classes=num_classes, base_channels=max(8, round(32 * self.width)))


def check_photometric(exposure: tuple[float, float], colour_cast: float) -> None:
    if not exposure[0] <= exposure[1]:
        raise ValueError(f"exposure must be a range of stops, low <= high, got {exposure}")
    if not 0.0 <= colour_cast < 1.0:
        raise ValueError(f"colour_cast must be in [0, 1), got {colour_cast}")
