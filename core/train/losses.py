"""Training losses: cross-entropy, optionally plus the Lovász-softmax surrogate of the mean IoU.

Lovász-softmax (Berman, Rannen Triki and Blaschko, CVPR 2018, "The Lovász-Softmax loss: a tractable surrogate
for the optimization of the intersection-over-union measure in neural networks") is the Lovász extension of
each class's Jaccard loss, evaluated at the pixels' errors ``|[label == c] - p_c|``. On hard (one-hot)
predictions it equals ``1 - IoU`` of each class exactly; between them it is piecewise linear, so its gradient
weighs each pixel by how much it moves the class's IoU, which cross-entropy's per-pixel average does not: a
missed pole pixel counts for far more IoU than a missed road pixel.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

LEVELS = 4096  # error levels the pixels are bucketed into (see lovasz_softmax)


def lovasz_softmax(logits: torch.Tensor, labels: torch.Tensor, ignore_index: int) -> torch.Tensor:
    """Mean over the classes present in `labels` of the Lovász extension of their Jaccard loss.

    logits (N, K, H, W), labels (N, H, W) int; pixels labelled `ignore_index` are left out. The batch is one
    pool of pixels (as the IoU the model is scored by is over all frames). Returns a scalar; 0 when no pixel
    is labelled.

    Berman et al. sort each class's errors (K sorts of every pixel of the batch: 4 s a step at 8 x 360x480 on a
    CPU core, more than the network's own step). Here the errors are bucketed into `LEVELS` levels instead,
    and each pixel takes the mean Jaccard step of its level: counting replaces sorting (one bincount), and
    the result is the Lovász extension with ties inside a level averaged over their orders, within
    1 / LEVELS of the exact value (each reordering moves a weight of at most the level's width, and the steps
    sum to at most 1); on hard predictions (errors 0 or 1) it is exact.
    """
    classes = logits.shape[1]
    probabilities = logits.float().softmax(dim=1)
    class_index = torch.arange(classes, device=logits.device).view(1, classes, 1, 1)
    foreground = labels.unsqueeze(1) == class_index  # (N, K, H, W); never true at void pixels
    sign = 1.0 - 2.0 * foreground.float()  # -1 for the class's own pixels, +1 for the others
    errors = foreground.float() + sign * probabilities  # |[label == c] - p_c| with a cheap gradient
    # level 0 holds the largest errors; each class has its own run of LEVELS counters, void pixels one more
    level = (LEVELS - 1) - (errors.detach() * LEVELS).to(torch.int32).clamp(max=LEVELS - 1)
    void = classes * LEVELS
    key = torch.where(labels.unsqueeze(1) != ignore_index, level + LEVELS * class_index.int(), void).reshape(-1)
    pixels = torch.bincount(key, minlength=void + 1)[:void].view(classes, LEVELS)
    missed = torch.bincount(key, weights=foreground.reshape(-1).float(), minlength=void + 1)[:void]
    missed = missed.view(classes, LEVELS).round().long()
    present = missed.sum(dim=1) > 0
    if not present.any():
        return logits.sum() * 0.0
    steps = _jaccard_steps(missed, pixels - missed) / pixels.clamp(min=1)
    per_pixel = torch.cat([steps.reshape(-1).float(), steps.new_zeros(1, dtype=torch.float32)])[key]
    per_class = (errors.reshape(-1) * per_pixel).view_as(errors).sum(dim=(0, 2, 3))
    return per_class[present].mean()


def _jaccard_steps(missed: torch.Tensor, false: torch.Tensor) -> torch.Tensor:
    """How much each level, in order of error, adds to the Jaccard loss of the pixels at it and before it:
    `missed` (K, L) counts the class's own pixels at each level (counted as errors once reached), `false`
    the other pixels (false positives once reached). Berman et al.'s Algorithm 1, on counts."""
    total = missed.sum(dim=1, keepdim=True)
    intersection = total - missed.cumsum(dim=1)
    union = (total + false.cumsum(dim=1)).clamp(min=1)
    jaccard = 1.0 - intersection / union
    return torch.diff(jaccard, dim=1, prepend=torch.zeros_like(jaccard[:, :1]))


def segmentation_loss(logits: torch.Tensor, labels: torch.Tensor, *, class_weights: torch.Tensor,
                      ignore_index: int, label_smoothing: float, lovasz_weight: float) -> torch.Tensor:
    """Class-weighted, label-smoothed cross-entropy, plus `lovasz_weight` times Lovász-softmax (0 = off)."""
    loss = F.cross_entropy(logits.float(), labels, weight=class_weights, ignore_index=ignore_index,
                           label_smoothing=label_smoothing)
    if lovasz_weight:
        loss = loss + lovasz_weight * lovasz_softmax(logits, labels, ignore_index)
    return loss
