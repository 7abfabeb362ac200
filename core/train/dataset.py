"""Image/label pairs for training and evaluation, and the small spec file that describes them."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..io.images import IMAGE_SUFFIXES, ImageReadError, read_image, to_rgb8


class DatasetError(Exception):
    """A data folder or spec file that cannot be used; the message names the file and the fix."""


@dataclass(frozen=True)
class DatasetSpec:
    class_names: tuple[str, ...]  # one per trained class, index = label value
    class_colours: tuple[tuple[int, int, int], ...]  # RGB per class, for overlays
    ignore_index: int | None = None  # label value excluded from loss and metrics (e.g. void)
    name: str = ""  # shown in provenance
    splits: dict[str, str] = field(default_factory=dict)  # split name -> list file of pairs

    def __post_init__(self) -> None:
        if len(self.class_names) != len(self.class_colours):
            raise DatasetError(f"{len(self.class_names)} class names but {len(self.class_colours)} colours")
        if self.ignore_index is not None and self.ignore_index < len(self.class_names):
            raise DatasetError(f"ignore_index {self.ignore_index} collides with class {self.ignore_index}")

    @property
    def num_classes(self) -> int:
        return len(self.class_names)


def load_spec(path: str | Path) -> DatasetSpec:
    """Read a spec JSON (class_names, class_colours, ignore_index, splits)."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text())
        return DatasetSpec(
            class_names=tuple(raw["class_names"]),
            class_colours=tuple(tuple(int(v) for v in c) for c in raw["class_colours"]),  # type: ignore[misc]
            ignore_index=raw.get("ignore_index"),
            name=str(raw.get("name", path.stem)),
            splits=dict(raw.get("splits", {})),
        )
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise DatasetError(f"{path}: not a valid dataset spec ({type(err).__name__}: {err})") from err


def find_pairs(data_dir: str | Path, split: str, spec: DatasetSpec) -> list[tuple[Path, Path]]:
    """Pairs from the split's list file (`img lbl` per line), else `split/images` + `split/labels` by name."""
    data_dir = Path(data_dir)
    list_file = data_dir / spec.splits.get(split, f"{split}.txt")
    if list_file.is_file():
        pairs = []
        for number, line in enumerate(list_file.read_text().splitlines(), 1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 2:
                raise DatasetError(f"{list_file}:{number}: expected 'IMAGE LABEL', got {line!r}")
            pairs.append((data_dir / parts[0], data_dir / parts[1]))
        return pairs
    for root in (data_dir / split, data_dir):
        images, labels = root / "images", root / "labels"
        if images.is_dir() and labels.is_dir():
            label_by_stem = {p.stem: p for p in labels.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES}
            pairs = [(p, label_by_stem[p.stem]) for p in sorted(images.iterdir()) if p.stem in label_by_stem]
            if pairs:
                return pairs
    raise DatasetError(
        f"{data_dir}: no '{split}' data: expected a list file {list_file.name} of 'IMAGE LABEL' lines, "
        f"or folders {split}/images and {split}/labels with matching names"
    )


class PairCache:
    """All pairs decoded once into memory: RGB uint8 (H, W, 3) and labels uint8 (H, W)."""

    def __init__(self, pairs: list[tuple[Path, Path]]) -> None:
        if not pairs:
            raise DatasetError("no image/label pairs to load")
        self.images: list[np.ndarray] = []
        self.labels: list[np.ndarray] = []
        for image_path, label_path in pairs:
            try:
                image = to_rgb8(read_image(image_path))
                label = read_image(label_path).pixels
            except ImageReadError as err:
                raise DatasetError(str(err)) from err
            if label.ndim != 2:
                raise DatasetError(f"{label_path}: labels must be one channel of class indices, got {label.shape}")
            if label.shape != image.shape[:2]:
                raise DatasetError(f"{label_path}: size {label.shape} differs from image {image.shape[:2]}")
            self.images.append(image)
            self.labels.append(label.astype(np.uint8))

    def __len__(self) -> int:
        return len(self.images)

    def class_frequencies(self, num_classes: int) -> np.ndarray:
        """Pixel share of each class (ignored labels excluded)."""
        counts = np.zeros(num_classes, np.float64)
        for label in self.labels:
            counts += np.bincount(label.ravel(), minlength=256)[:num_classes]
        return counts / max(counts.sum(), 1.0)
