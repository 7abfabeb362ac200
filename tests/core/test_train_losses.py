"""Training losses: Lovász-softmax is exactly 1 - IoU on hard predictions, ignores void, and its gradient raises
the IoU; hard example mining averages the hardest share of the labelled pixels and leaves the rest without gradient."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from leanseg.core.train.losses import LEVELS, hardest_pixels_cross_entropy, lovasz_softmax, segmentation_loss

VOID = 255


def mean_iou_loss(predicted: torch.Tensor, labels: torch.Tensor) -> float:
    """Mean over the classes in `labels` (void left out) of 1 - IoU, counted directly."""
    keep = labels != VOID
    predicted, labels = predicted[keep], labels[keep]
    losses = []
    for c in labels.unique().tolist():
        intersection = ((predicted == c) & (labels == c)).sum().item()
        union = ((predicted == c) | (labels == c)).sum().item()
        losses.append(1.0 - intersection / union)
    return sum(losses) / len(losses)


def exact_lovasz(logits: torch.Tensor, labels: torch.Tensor, void: int = VOID) -> torch.Tensor:
    """Berman et al.'s reference: each class's errors sorted, dotted with the Jaccard loss's increments."""
    probabilities = logits.softmax(1).permute(0, 2, 3, 1).reshape(-1, logits.shape[1])
    flat = labels.reshape(-1)
    probabilities, flat = probabilities[flat != void], flat[flat != void]
    losses = []
    for c in flat.unique().tolist():
        foreground = (flat == c).float()
        errors, order = torch.sort((foreground - probabilities[:, c]).abs(), descending=True)
        ordered = foreground[order]
        jaccard = 1 - (ordered.sum() - ordered.cumsum(0)) / (ordered.sum() + (1 - ordered).cumsum(0))
        losses.append(torch.dot(errors, torch.cat([jaccard[:1], jaccard.diff()])))
    return torch.stack(losses).mean()


def hard_logits(predicted: torch.Tensor, classes: int) -> torch.Tensor:
    """Logits whose softmax is one-hot (to float precision) at `predicted`."""
    return F.one_hot(predicted, classes).permute(0, 3, 1, 2).float() * 100.0


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), classes=st.integers(2, 6), void_share=st.sampled_from([0.0, 0.3]))
def test_on_hard_predictions_it_is_one_minus_the_mean_iou(seed: int, classes: int, void_share: float) -> None:
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, classes, (2, 7, 9), generator=generator)
    labels[torch.rand(labels.shape, generator=generator) < void_share] = VOID
    if (labels == VOID).all():
        labels[0, 0, 0] = 0
    predicted = torch.where(torch.rand(labels.shape, generator=generator) < 0.6, labels.clamp(max=classes - 1),
                            torch.randint(0, classes, labels.shape, generator=generator))
    loss = lovasz_softmax(hard_logits(predicted, classes), labels, VOID).item()
    assert abs(loss - mean_iou_loss(predicted, labels)) < 1e-5


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), classes=st.integers(2, 6), scale=st.sampled_from([0.5, 3.0, 8.0]))
def test_on_soft_predictions_it_is_within_one_level_of_the_sorted_exact_value(seed: int, classes: int,
                                                                              scale: float) -> None:
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(2, classes, 9, 11, generator=generator) * scale
    labels = torch.randint(0, classes, (2, 9, 11), generator=generator)
    labels[:, 0] = VOID
    assert abs(lovasz_softmax(logits, labels, VOID).item() - exact_lovasz(logits, labels).item()) <= 1.0 / LEVELS


def test_its_gradient_is_the_sorted_exact_ones_on_a_frame_whose_levels_hold_many_pixels() -> None:
    """12 classes in 8x8 blocks over 2 x 120x160 pixels, void = the class count (as CamVid's 11), one class
    absent from the labels: each level holds pixels of the class and of others, whose exact steps differ."""
    generator = torch.Generator().manual_seed(3)
    blocks = torch.randint(0, 11, (2, 15, 20), generator=generator)  # class 11 never drawn: absent
    labels = blocks.repeat_interleave(8, 1).repeat_interleave(8, 2)
    labels[:, :8] = 12  # void
    for strength in (0.5, 2.0, 5.0):
        logits = F.one_hot(labels.clamp(max=11), 12).permute(0, 3, 1, 2).float() * strength
        logits = (logits + torch.randn(logits.shape, generator=generator) * 1.5).requires_grad_(True)
        counted = lovasz_softmax(logits, labels, 12)
        (counted_gradient,) = torch.autograd.grad(counted, logits)
        exact = exact_lovasz(logits, labels, void=12)
        (exact_gradient,) = torch.autograd.grad(exact, logits)
        assert abs(counted.item() - exact.item()) <= 1.0 / LEVELS
        assert (counted_gradient - exact_gradient).norm() <= 0.01 * exact_gradient.norm(), strength
        assert counted_gradient[:, :, :8].abs().max() == 0  # void pixels get no gradient


def test_a_non_finite_logit_gives_a_non_finite_loss_not_a_crash() -> None:
    logits = torch.zeros(1, 3, 4, 4)
    logits[0, 1, 2, 2] = float("nan")
    assert not torch.isfinite(lovasz_softmax(logits, torch.zeros(1, 4, 4, dtype=torch.long), VOID))


def test_void_pixels_change_nothing() -> None:
    generator = torch.Generator().manual_seed(1)
    logits = torch.randn(1, 4, 8, 8, generator=generator)
    labels = torch.randint(0, 4, (1, 8, 8), generator=generator)
    with_void = labels.clone()
    with_void[:, :, 6:] = VOID
    cropped = lovasz_softmax(logits[..., :6], labels[..., :6], VOID)
    assert torch.allclose(lovasz_softmax(logits, with_void, VOID), cropped)
    assert lovasz_softmax(logits, torch.full_like(labels, VOID), VOID).item() == 0.0


def test_its_gradient_raises_the_iou_of_a_rare_class() -> None:
    """A thin class (one row of pixels in ten) that cross-entropy's per-pixel average pays little for:
    gradient steps on Lovász alone take the mean IoU from 0.45 (all called class 0) to 1."""
    labels = torch.zeros(1, 10, 10, dtype=torch.long)
    labels[:, 4] = 1
    logits = torch.zeros(1, 2, 10, 10)
    logits[:, 0] = 1.0  # everything called class 0 at the start
    logits.requires_grad_(True)
    optimizer = torch.optim.SGD([logits], lr=5.0)
    start = mean_iou_loss(logits.argmax(1), labels)
    for _ in range(50):
        optimizer.zero_grad()
        lovasz_softmax(logits, labels, VOID).backward()
        optimizer.step()
    assert abs(start - 0.55) < 1e-9 and mean_iou_loss(logits.argmax(1), labels) == 0.0


def test_weight_zero_is_the_cross_entropy_alone() -> None:
    generator = torch.Generator().manual_seed(2)
    logits = torch.randn(2, 3, 5, 5, generator=generator)
    labels = torch.randint(0, 3, (2, 5, 5), generator=generator)
    weights = torch.tensor([1.0, 2.0, 0.5])
    options = {"class_weights": weights, "ignore_index": VOID, "label_smoothing": 0.05}
    cross_entropy = F.cross_entropy(logits, labels, weight=weights, ignore_index=VOID, label_smoothing=0.05)
    assert torch.equal(segmentation_loss(logits, labels, lovasz_weight=0.0, **options), cross_entropy)
    both = segmentation_loss(logits, labels, lovasz_weight=2.0, **options)
    assert torch.allclose(both, cross_entropy + 2.0 * lovasz_softmax(logits, labels, VOID))


def test_hard_example_mining_over_every_pixel_is_the_weighted_smoothed_cross_entropy() -> None:
    generator = torch.Generator().manual_seed(3)
    logits = torch.randn(2, 4, 6, 7, generator=generator)
    labels = torch.randint(0, 4, (2, 6, 7), generator=generator)
    labels[0, :2] = VOID
    weights = torch.tensor([0.5, 1.0, 2.0, 4.0])
    for smoothing in (0.0, 0.05):
        full = F.cross_entropy(logits, labels, weight=weights, ignore_index=VOID, label_smoothing=smoothing)
        mined = hardest_pixels_cross_entropy(logits, labels, class_weights=weights, ignore_index=VOID,
                                             label_smoothing=smoothing, fraction=1.0)
        assert torch.allclose(mined, full)


def test_hard_example_mining_averages_the_hardest_share_and_leaves_the_rest_without_gradient() -> None:
    generator = torch.Generator().manual_seed(4)
    logits = torch.randn(1, 3, 10, 10, generator=generator, requires_grad=True)
    labels = torch.randint(0, 3, (1, 10, 10), generator=generator)
    labels[0, 0] = VOID  # 10 void pixels: 90 labelled, the hardest quarter is 23 of them
    per_pixel = F.cross_entropy(logits.detach(), labels, ignore_index=VOID, reduction="none")
    hardest = per_pixel[labels != VOID].topk(23).values
    loss = segmentation_loss(logits, labels, class_weights=torch.ones(3), ignore_index=VOID,
                             label_smoothing=0.0, lovasz_weight=0.0, hardest_fraction=0.25)
    assert torch.allclose(loss, hardest.mean())
    loss.backward()
    moved = logits.grad.abs().sum(dim=1)[0] > 0  # (10, 10)
    assert int(moved.sum()) == 23
    assert not moved[0].any()  # void pixels
    assert bool((per_pixel[0][moved] >= hardest.min() - 1e-6).all())


def test_hard_example_mining_over_a_frame_of_void_is_zero_not_nan() -> None:
    logits = torch.randn(1, 3, 4, 4, requires_grad=True)
    labels = torch.full((1, 4, 4), VOID)
    loss = hardest_pixels_cross_entropy(logits, labels, class_weights=torch.ones(3), ignore_index=VOID,
                                        label_smoothing=0.1, fraction=0.25)
    loss.backward()
    assert loss.item() == 0.0 and logits.grad is not None and not logits.grad.any()
