"""Training augmentation with OpenCV and numpy: random scale, crop, flip, colour jitter, exposure and
colour cast."""
from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from .options import check_photometric


@dataclass(frozen=True)
class AugmentConfig:
    crop: tuple[int, int] = (256, 320)  # (height, width) of training crops
    scale_range: tuple[float, float] = (0.6, 1.4)  # random rescale before cropping
    flip: bool = True  # random horizontal flip
    jitter: float = 0.25  # brightness/contrast/saturation jitter amplitude (0 = off)
    exposure: tuple[float, float] = (0.0, 0.0)  # exposure change in stops, uniform in [low, high] (0 0 = off)
    colour_cast: float = 0.0  # per-channel gain in [1 - colour_cast, 1 + colour_cast] (0 = off)

    def __post_init__(self) -> None:
        if min(self.crop) < 16:
            raise ValueError(f"crop must be at least 16x16, got {self.crop}")
        check_photometric(self.exposure, self.colour_cast)
        low, high = self.scale_range
        if not 0 < low <= high:
            raise ValueError(f"scale_range must be 0 < low <= high, got {self.scale_range}")


def augment(
    image: np.ndarray, label: np.ndarray, config: AugmentConfig, rng: np.random.Generator, ignore_index: int
) -> tuple[np.ndarray, np.ndarray]:
    """(H, W, 3) uint8 + (H, W) uint8 -> crop-sized copies; padding is labelled `ignore_index`."""
    scale = float(rng.uniform(*config.scale_range))
    height, width = label.shape
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    image = cv2.resize(image, size, interpolation=cv2.INTER_LINEAR)
    label = cv2.resize(label, size, interpolation=cv2.INTER_NEAREST)
    crop_h, crop_w = config.crop
    pad_h, pad_w = max(0, crop_h - label.shape[0]), max(0, crop_w - label.shape[1])
    if pad_h or pad_w:
        image = cv2.copyMakeBorder(image, 0, pad_h, 0, pad_w, cv2.BORDER_CONSTANT, value=(0, 0, 0))
        label = cv2.copyMakeBorder(label, 0, pad_h, 0, pad_w, cv2.BORDER_CONSTANT, value=ignore_index)
    top = int(rng.integers(0, label.shape[0] - crop_h + 1))
    left = int(rng.integers(0, label.shape[1] - crop_w + 1))
    image = image[top : top + crop_h, left : left + crop_w]
    label = label[top : top + crop_h, left : left + crop_w]
    if config.flip and rng.random() < 0.5:
        image, label = image[:, ::-1], label[:, ::-1]
    if config.jitter > 0:
        image = colour_jitter(image, config.jitter, rng)
    if config.exposure != (0.0, 0.0) or config.colour_cast > 0:
        image = exposure_and_cast(image, config.exposure, config.colour_cast, rng)
    return np.ascontiguousarray(image), np.ascontiguousarray(label)


def colour_jitter(image: np.ndarray, amount: float, rng: np.random.Generator) -> np.ndarray:
    """Random brightness, contrast and saturation, each by a factor in [1 - amount, 1 + amount]."""
    brightness, contrast, saturation = rng.uniform(1 - amount, 1 + amount, size=3)
    pixels = image.astype(np.float32) * brightness
    mean = pixels.mean()
    pixels = (pixels - mean) * contrast + mean
    gray = pixels.mean(axis=2, keepdims=True)
    pixels = (pixels - gray) * saturation + gray
    return np.clip(pixels, 0, 255).astype(np.uint8)


def exposure_and_cast(image: np.ndarray, stops: tuple[float, float], cast: float,
                      rng: np.random.Generator) -> np.ndarray:
    """Scale every pixel by 2**u, u uniform in [low, high] stops, and each channel by a gain in
    [1 - cast, 1 + cast]: a white sky comes out grey or tinted, as at dusk, which brightness and contrast
    jitter around the image mean rarely do to a saturated region."""
    gains = 2.0 ** rng.uniform(*stops) * rng.uniform(1 - cast, 1 + cast, size=3)
    pixels = image.astype(np.float32) * gains.astype(np.float32)
    return np.clip(pixels, 0, 255).astype(np.uint8)
