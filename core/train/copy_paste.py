"""Copy-paste of rare classes between the crops of one batch (Ghiasi et al. 2021, "Simple Copy-Paste is a Strong
Data Augmentation Method for Instance Segmentation", here on semantic labels): each crop, with probability p,
takes the pixels of the rare classes from another crop of the batch, image and label alike. Poles, signs and
riders then appear on other roads, under other light and beside other classes than the few frames that hold them.
"""
from __future__ import annotations

import numpy as np


def rare_classes(frequencies: np.ndarray) -> np.ndarray:
    """Per class, whether it is rare: present in the training frames and below the median frequency of those that
    are (the classes that median-frequency weighting weighs up)."""
    present = frequencies > 0
    if not present.any():
        return np.zeros_like(present)
    return present & (frequencies < np.median(frequencies[present]))


def paste_rare_classes(batch: list[tuple[np.ndarray, np.ndarray]], rare: np.ndarray, probability: float,
                       rng: np.random.Generator) -> list[tuple[np.ndarray, np.ndarray]]:
    """(image (H, W, 3), label (H, W)) crops of one size -> the same, where each crop, with `probability`, has
    the rare-class pixels of another crop of the batch pasted over it. The sources are the crops as they came
    in: a pasted crop is not a source in turn. Draws nothing from `rng` when `probability` is 0."""
    if probability <= 0 or len(batch) < 2 or not rare.any():
        return batch
    rare_ids = np.flatnonzero(rare)
    pasted = []
    for index, (image, label) in enumerate(batch):
        if rng.random() >= probability:
            pasted.append((image, label))
            continue
        other = int(rng.integers(0, len(batch) - 1))
        source_image, source_label = batch[other + (other >= index)]  # any crop but this one
        mask = np.isin(source_label, rare_ids)
        if not mask.any():
            pasted.append((image, label))
            continue
        image, label = image.copy(), label.copy()
        image[mask] = source_image[mask]
        label[mask] = source_label[mask]
        pasted.append((image, label))
    return pasted

