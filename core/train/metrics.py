"""Confusion matrix, per-class IoU, mean IoU and pixel accuracy."""
from __future__ import annotations

import numpy as np


def confusion_matrix(truth: np.ndarray, predicted: np.ndarray, num_classes: int) -> np.ndarray:
    """(K, K) int64 counts, rows = truth, columns = prediction; truth outside 0..K-1 is ignored."""
    truth = truth.ravel().astype(np.int64)
    predicted = predicted.ravel().astype(np.int64)
    keep = (truth >= 0) & (truth < num_classes)
    index = truth[keep] * num_classes + np.clip(predicted[keep], 0, num_classes - 1)
    return np.bincount(index, minlength=num_classes * num_classes).reshape(num_classes, num_classes)


def iou_per_class(matrix: np.ndarray) -> np.ndarray:
    """IoU = TP / (TP + FP + FN) per class; NaN for a class absent from truth and prediction."""
    tp = np.diag(matrix).astype(np.float64)
    union = matrix.sum(0) + matrix.sum(1) - tp
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(union > 0, tp / union, np.nan)


def mean_iou(matrix: np.ndarray) -> float:
    """Mean IoU over the classes in truth or prediction; NaN when there are none (every label ignored)."""
    ious = iou_per_class(matrix)
    return float("nan") if np.isnan(ious).all() else float(np.nanmean(ious))


def pixel_accuracy(matrix: np.ndarray) -> float:
    return float(np.diag(matrix).sum() / max(matrix.sum(), 1))
