"""Which frames a run trains and validates on: splits pooled, or one sequence held out.

CamVid's frame names carry their sequence (`0016E5_07959.png`): the prefix before the first `_`.
Holding a whole sequence out measures how a model does on a street it never saw, which a
validation split drawn from a training sequence does not.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .dataset import DatasetError, DatasetSpec, SplitFrames, split_frames
from .options import TrainConfig

Pairs = list[tuple[Path, Path]]


def sequence_of(image_path: str | Path) -> str:
    """The sequence a frame belongs to: its file name up to the first `_` (the whole stem if none)."""
    return Path(image_path).stem.split("_", 1)[0]


def run_frames(config: TrainConfig, spec: DatasetSpec, log: Callable[[str], None] | None = None
               ) -> tuple[Pairs, Pairs]:
    """(training pairs, validation pairs) for a run; validation is empty when it has none. `log` is told of the
    images the splits leave out for want of a label."""
    pool: Pairs = []
    unlabelled: list[Path] = []
    for split in config.train_splits:
        frames = split_frames(config.data_dir, split, spec)
        pool += [pair for pair in frames.pairs if pair not in pool]
        unlabelled += frames.unlabelled
    if config.holdout_sequence:
        train = [pair for pair in pool if sequence_of(pair[0]) != config.holdout_sequence]
        val = [pair for pair in pool if sequence_of(pair[0]) == config.holdout_sequence]
        if not val:
            found = sorted({sequence_of(pair[0]) for pair in pool})
            raise DatasetError(f"{config.data_dir}: no frames of sequence {config.holdout_sequence!r} in "
                               f"{', '.join(config.train_splits)}; sequences there: {', '.join(found)}")
    else:
        train = pool
        try:
            frames = split_frames(config.data_dir, config.val_split, spec) if config.val_split else SplitFrames([])
        except DatasetError as err:
            raise DatasetError(f"{err} (or --val-split none to train without validation)") from None
        val = frames.pairs
        unlabelled += frames.unlabelled
        training_images = {image for image, _ in train}
        shared = [image for image, _ in val if image in training_images]
        if shared:  # e.g. one images/ + labels/ folder without split folders: it serves every split
            raise DatasetError(f"{config.data_dir}: the '{config.val_split}' split's frames are training frames "
                               f"({len(shared)} of {len(val)}, e.g. {shared[0]}), so its score would say nothing; "
                               f"give {config.val_split}/images + {config.val_split}/labels, or --val-split none")
    if config.limit_images:
        train = train[: config.limit_images]
    if not train:
        raise DatasetError(f"{config.data_dir}: no training frames left in {', '.join(config.train_splits)}")
    if log is not None and (note := unlabelled_note(unlabelled)):
        log(note)
    return train, val


def unlabelled_note(unlabelled: list[Path]) -> str:
    """'' or one line naming the images left out for want of a label of their name (`SplitFrames.unlabelled`)."""
    left = list(dict.fromkeys(unlabelled))  # a folder two splits share is named once
    if not left:
        return ""
    many = len(left) > 1
    return (f"left out {len(left)} image{'s' if many else ''} with no label of {'their' if many else 'its'} name in "
            f"labels/: {left[0]}" + (", ..." if many else ""))

