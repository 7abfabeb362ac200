"""Evaluation: one confusion matrix accumulated over a split at full resolution."""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from .batches import to_batch
from .dataset import PairCache
from .lean import autocast_for, eval_mode
from .metrics import confusion_matrix


def evaluate_model(model: nn.Module, data: PairCache, num_classes: int, device: torch.device,
                   precision: str = "fp32", batch_size: int = 4) -> np.ndarray:
    """(K, K) confusion matrix of `model` over every pair; labels >= K (void) ignored."""
    matrix = np.zeros((num_classes, num_classes), np.int64)
    with eval_mode(model), torch.inference_mode():
        for start in range(0, len(data), batch_size):
            images = data.images[start : start + batch_size]
            shapes = {image.shape for image in images}
            groups = [images] if len(shapes) == 1 else [[image] for image in images]
            predictions = []
            for group in groups:
                with autocast_for(device, precision):
                    logits = model(to_batch(group, device))
                predictions += list(logits.float().argmax(1).to(torch.uint8).cpu().numpy())
            for prediction, truth in zip(predictions, data.labels[start : start + batch_size]):
                matrix += confusion_matrix(truth, prediction, num_classes)
    return matrix
