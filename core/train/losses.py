"""Training losses: cross-entropy (over every labelled pixel, or over the hardest share of them), optionally plus
the Lovász-softmax surrogate of the mean IoU.

Lovász-softmax (Berman, Rannen Triki and Blaschko, CVPR 2018, "The Lovász-Softmax loss: a tractable surrogate
for the optimization of the intersection-over-union measure in neural networks") is the Lovász extension of
each class's Jaccard loss, evaluated at the pixels' errors ``|[label == c] - p_c|``. On hard (one-hot)
predictions it equals ``1 - IoU`` of each class exactly; between them it is piecewise linear, so its gradient
weighs each pixel by how much it moves the class's IoU, which cross-entropy's per-pixel average does not: a
missed pole pixel counts for far more IoU than a missed road pixel.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

LEVELS = 4096  # error levels the pixels are bucketed into (see lovasz_softmax)


def lovasz_softmax(logits: torch.Tensor, labels: torch.Tensor, ignore_index: int) -> torch.Tensor:
    """Mean over the classes present in `labels` of the Lovász extension of their Jaccard loss.

    logits (N, K, H, W), labels (N, H, W) int; pixels labelled `ignore_index` are left out. The batch is one
    pool of pixels (as the IoU the model is scored by is over all frames). Returns a scalar; 0 when no pixel
    is labelled.

    Berman et al. sort each class's errors (K sorts of every pixel of the batch: 4 s a step at 8 x 360x480 on a
    CPU core, more than the network's own step). Here the errors are bucketed into `LEVELS` levels instead and
    counted (one bincount): each level adds the exact Jaccard increment of its pixels, shared between the
    class's own pixels and the others in proportion to what one more of each adds at the level's midpoint
    (1 / U and I / U^2), as the sorted order would give them. The value is within 1 / LEVELS of the exact one
    (reordering inside a level moves weights that sum to at most 1 by at most the level's width), exact on
    hard predictions, and its gradient within a fraction of a percent of the sorted one's.
    """
    classes = logits.shape[1]
    probabilities = logits.float().softmax(dim=1)
    class_index = torch.arange(classes, device=logits.device).view(1, classes, 1, 1)
    foreground = labels.unsqueeze(1) == class_index  # (N, K, H, W); never true at void pixels
    own = foreground.float()
    errors = own + (1.0 - 2.0 * own) * probabilities  # |[label == c] - p_c| with a cheaper gradient than abs
    # level 0 holds the largest errors; each class has 2 x LEVELS counters (other, own), void pixels one more
    level = (LEVELS - 1) - (errors.detach().nan_to_num(1.0) * LEVELS).long().clamp(0, LEVELS - 1)
    void = 2 * classes * LEVELS
    counter = 2 * (level + LEVELS * class_index) + own.long()
    key = torch.where(labels.unsqueeze(1) != ignore_index, counter, void).reshape(-1)
    counts = torch.bincount(key, minlength=void + 1)[:void].view(classes, LEVELS, 2).double()
    false, missed = counts[..., 0], counts[..., 1]
    present = missed.sum(dim=1) > 0
    if not present.any():
        return logits.sum() * 0.0
    steps = torch.stack(_level_steps(missed, false), dim=-1).reshape(-1).float()
    per_pixel = torch.cat([steps, steps.new_zeros(1)])[key]
    per_class = (errors.reshape(-1) * per_pixel).view_as(errors).sum(dim=(0, 2, 3))
    return per_class[present].mean()


def _level_steps(missed: torch.Tensor, false: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The Jaccard step of one other pixel and of one own pixel at each level (K, L), in order of error:
    `missed` counts the class's own pixels at each level (errors once reached), `false` the others (false
    positives once reached). Berman et al.'s Algorithm 1 on counts: the level's exact increment of
    J = 1 - I / U, split between its pixels by the derivatives at the level's midpoint."""
    total = missed.sum(dim=1, keepdim=True)
    intersection_after = total - missed.cumsum(dim=1)
    union_after = total + false.cumsum(dim=1)
    intersection_before, union_before = intersection_after + missed, union_after - false
    increment = intersection_before / union_before.clamp(min=1) - intersection_after / union_after.clamp(min=1)
    union_mid = ((union_before + union_after) / 2).clamp(min=1)
    own, other = 1.0 / union_mid, (intersection_before + intersection_after) / 2 / union_mid**2
    scale = increment / (missed * own + false * other).clamp(min=1e-300)
    return other * scale, own * scale


def hardest_pixels_cross_entropy(logits: torch.Tensor, labels: torch.Tensor, *, class_weights: torch.Tensor,
                                 ignore_index: int, label_smoothing: float, fraction: float) -> torch.Tensor:
    """Online hard example mining (Shrivastava et al. 2016, as in HRNet's and PSPNet's segmentation training):
    the class-weighted, label-smoothed cross-entropy averaged over the `fraction` of the batch's labelled pixels
    with the largest loss; the rest get no gradient. Each pixel's loss is `F.cross_entropy`'s own (smoothing
    weighted class by class as it does), the average divides by the kept pixels' label weights as its mean
    does: at `fraction` 1 this is `F.cross_entropy`'s value.
    """
    per_pixel = F.cross_entropy(logits.float(), labels, weight=class_weights, ignore_index=ignore_index,
                                label_smoothing=label_smoothing, reduction="none")
    labelled = labels != ignore_index
    losses = per_pixel[labelled]
    if losses.numel() == 0:
        return logits.sum() * 0.0
    hardest = losses.detach().topk(max(1, math.ceil(fraction * losses.numel())), sorted=False).indices
    return losses[hardest].sum() / class_weights[labels[labelled][hardest]].sum()


def segmentation_loss(logits: torch.Tensor, labels: torch.Tensor, *, class_weights: torch.Tensor,
                      ignore_index: int, label_smoothing: float, lovasz_weight: float,
                      hardest_fraction: float = 1.0) -> torch.Tensor:
    """Class-weighted, label-smoothed cross-entropy (over the hardest `hardest_fraction` of the labelled pixels
    when below 1), plus `lovasz_weight` times Lovász-softmax (0 = off)."""
    if hardest_fraction < 1.0:
        loss = hardest_pixels_cross_entropy(logits, labels, class_weights=class_weights, ignore_index=ignore_index,
                                            label_smoothing=label_smoothing, fraction=hardest_fraction)
    else:
        loss = F.cross_entropy(logits.float(), labels, weight=class_weights, ignore_index=ignore_index,
                               label_smoothing=label_smoothing)
    if lovasz_weight:
        loss = loss + lovasz_weight * lovasz_softmax(logits, labels, ignore_index)
    return loss
