"""Image/label pairs for training and evaluation, and the small spec file that describes them."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..assets import assets_dir
from ..io.images import IMAGE_SUFFIXES, ImageReadError, read_image, to_model_rgb8

CAMVID_SPEC = assets_dir() / "datasets" / "camvid.json"  # train's default --spec


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
        ignore = self.ignore_index
        if ignore is not None:
            if isinstance(ignore, bool) or not isinstance(ignore, int):
                raise DatasetError(f"ignore_index {ignore!r}: an integer 0-255")
            if ignore < len(self.class_names):
                raise DatasetError(f"ignore_index {ignore} collides with class {ignore}")
            if ignore > 255:
                raise DatasetError(f"ignore_index {ignore}: labels are kept as 8-bit class indices, so it must be "
                                   "0-255")
        bad = [colour for colour in self.class_colours if len(colour) != 3 or not all(0 <= v <= 255 for v in colour)]
        if bad:
            raise DatasetError(f"class colour {list(bad[0])}: each colour is 3 values 0-255 (R, G, B)")

    @property
    def ignored(self) -> int:
        """The label value left out of the loss and the figures: ignore_index, or 255 when the spec has none."""
        return self.ignore_index if self.ignore_index is not None else 255

    @property
    def num_classes(self) -> int:
        return len(self.class_names)


def load_spec(path: str | Path) -> DatasetSpec:
    """Read a spec JSON (class_names, class_colours, ignore_index, splits)."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text())
        if "class_colours" not in raw and "class_colors" not in raw:
            raise KeyError("class_colours")
        colours = raw["class_colours"] if "class_colours" in raw else raw["class_colors"]
        return DatasetSpec(
            class_names=tuple(raw["class_names"]),
            class_colours=tuple(tuple(int(v) for v in c) for c in colours),  # type: ignore[misc]
            ignore_index=raw.get("ignore_index"),
            name=str(raw.get("name", path.stem)),
            splits=dict(raw.get("splits", {})),
        )
    except KeyError as err:
        raise DatasetError(f"{path}: not a valid dataset spec: no {err} field (a spec holds class_names and "
                           "class_colours, and may hold ignore_index, name and splits; see "
                           f"{CAMVID_SPEC})") from err
    except DatasetError as err:
        raise DatasetError(f"{path}: {err}") from err
    except (OSError, ValueError, TypeError) as err:
        raise DatasetError(f"{path}: not a valid dataset spec ({type(err).__name__}: {err})") from err


def find_pairs(data_dir: str | Path, split: str, spec: DatasetSpec | None = None) -> list[tuple[Path, Path]]:
    """Pairs from the split's list file (`img lbl` per line), else `split/images` + `split/labels` by name
    (`split_frames`, without the images it leaves out)."""
    return split_frames(data_dir, split, spec).pairs


@dataclass(frozen=True)
class SplitFrames:
    """A split's image/label pairs, and the images of its images/ folder that no label in labels/ names."""

    pairs: list[tuple[Path, Path]]
    unlabelled: list[Path] = field(default_factory=list)


def split_frames(data_dir: str | Path, split: str, spec: DatasetSpec | None = None) -> SplitFrames:
    """The split's pairs from its list file (`img lbl` per line), else `split/images` + `split/labels` by name.

    `spec.splits` may name a split's list file (default SPLIT.txt). Every file a list names must exist:
    a missing one is named now, before any pair is read."""
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        state = "is a file, not a folder" if data_dir.exists() else "does not exist"
        raise DatasetError(f"data folder {data_dir} {state}; give --data the folder that holds the split list "
                           "files (train.txt, val.txt) or the split folders (train/images, train/labels)")
    named = spec.splits if spec is not None else {}
    list_file = data_dir / named.get(split, f"{split}.txt")
    if list_file.is_file():
        return SplitFrames(_listed_pairs(data_dir, list_file))
    own = _folder_pairs(data_dir / split)
    for frames in (own, _folder_pairs(data_dir)):
        if frames.pairs:
            return frames
    found = _splits_in(data_dir, named)
    images = data_dir / split / "images"
    if split in found and images.is_dir() and not own.unlabelled:
        raise DatasetError(f"{images}: no images in it (PNG, JPEG, TIFF, BMP or WebP)")
    if split in found:  # its folders are there, but no label has its image's name
        raise DatasetError(f"{data_dir}: the '{split}' split's images and labels share no file names (a label must "
                           "have its image's name, in images/ and labels/)")
    if found:
        raise DatasetError(f"{data_dir}: no '{split}' split (no {list_file.name}, no {split}/images and "
                           f"{split}/labels); splits there: {', '.join(found)}")
    raise DatasetError(
        f"{data_dir}: no '{split}' data: expected a list file {list_file.name} of 'IMAGE LABEL' lines, "
        f"or folders {split}/images and {split}/labels with matching names"
    )


def _folder_pairs(root: Path) -> SplitFrames:
    """The pairs of `root/images` and `root/labels` matched by file stem, and the images with no label."""
    images, labels = root / "images", root / "labels"
    if not (images.is_dir() and labels.is_dir()):
        return SplitFrames([])
    label_by_stem = {p.stem: p for p in labels.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES}
    found = [p for p in sorted(images.iterdir()) if p.suffix.lower() in IMAGE_SUFFIXES]
    return SplitFrames([(p, label_by_stem[p.stem]) for p in found if p.stem in label_by_stem],
                       [p for p in found if p.stem not in label_by_stem])


def _splits_in(data_dir: Path, named: dict[str, str] | None = None) -> list[str]:
    """The splits `data_dir` offers: its list files (NAME.txt, or as `named` maps them) and its NAME/images +
    NAME/labels folders, sorted."""
    found = {name for name, file in (named or {}).items() if (data_dir / file).is_file()}
    found |= {path.stem for path in data_dir.glob("*.txt") if _looks_like_a_list(path)}
    found |= {path.name for path in data_dir.iterdir() if (path / "images").is_dir() and (path / "labels").is_dir()}
    return sorted(found)


def _looks_like_a_list(path: Path) -> bool:
    """Whether the text file's first line is an `IMAGE LABEL` pair (a README.txt or LICENSE.txt is no split)."""
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            first = handle.readline(4096)
    except OSError:
        return False
    return len(first.split()) == 2


def _listed_pairs(data_dir: Path, list_file: Path) -> list[tuple[Path, Path]]:
    """The pairs of a list file of `IMAGE LABEL` lines (paths relative to `data_dir`), each file checked to exist."""
    pairs = []
    for number, line in enumerate(list_file.read_text().splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 2:
            raise DatasetError(f"{list_file}:{number}: expected 'IMAGE LABEL', got {line!r}")
        pairs.append((data_dir / parts[0], data_dir / parts[1]))
    missing = [path for pair in pairs for path in pair if not path.is_file()]
    if missing:
        which = "" if len(missing) == 1 else ", the first"
        raise DatasetError(f"{list_file} names {len(missing)} missing file{'s' if len(missing) > 1 else ''} "
                           f"(of {2 * len(pairs)}){which}: {missing[0]}")
    return pairs


def check_label(label: np.ndarray, label_path: Path, image_shape: tuple[int, ...], image_path: Path) -> None:
    """DatasetError unless `label` is one channel of the size of its image (`image_shape`: (H, W, ...)), and not
    a JPEG (its compression makes new values at every edge)."""
    if label_path.suffix.lower() in (".jpg", ".jpeg"):
        raise DatasetError(f"{label_path}: a JPEG label: its compression changes the class indices along every "
                           "edge; save labels losslessly, as PNG")
    if label.ndim != 2:
        raise DatasetError(f"{label_path}: labels must be one channel of class indices (a greyscale PNG; a palette "
                           f"PNG is read as its colours), got {label.shape}")
    if label.shape != tuple(image_shape[:2]):
        raise DatasetError(f"label {label_path} is {_size(label.shape)} (width x height), its image {image_path} "
                           f"{_size(image_shape)}: a label must match its image pixel for pixel")


def _size(shape: tuple[int, ...]) -> str:
    return f"{shape[1]}x{shape[0]} px"


def check_label_values(label: np.ndarray, label_path: Path, spec: DatasetSpec) -> None:
    """DatasetError naming the values of `label` that are neither a class of `spec` nor its ignored value."""
    if int(label.max(initial=0)) < spec.num_classes:
        return
    bad = [int(v) for v in np.unique(label) if v >= spec.num_classes and v != spec.ignored]
    if bad:
        shown = ", ".join(str(v) for v in bad[:8]) + (", ..." if len(bad) > 8 else "")
        which = "label value" + (f"s {shown} are not classes" if len(bad) > 1 else f" {shown} is not a class")
        raise DatasetError(f"{label_path}: {which} of the spec ({spec.num_classes} classes: 0-"
                           f"{spec.num_classes - 1}; {spec.ignored} marks ignored pixels); a label holds class "
                           "indices, one channel, saved losslessly (PNG, not JPEG): check it, or --spec")


class PairCache:
    """All pairs decoded once into memory: RGB uint8 (H, W, 3) on the scale inference reads them (`to_model_rgb8`)
    and labels uint8 (H, W), each label's values
    checked against `spec` first (a class index or the ignored value)."""

    def __init__(self, pairs: list[tuple[Path, Path]], spec: DatasetSpec) -> None:
        if not pairs:
            raise DatasetError("no image/label pairs to load")
        self.images: list[np.ndarray] = []
        self.labels: list[np.ndarray] = []
        for image_path, label_path in pairs:
            try:
                image = to_model_rgb8(read_image(image_path))
                label = read_image(label_path).pixels
            except ImageReadError as err:
                raise DatasetError(str(err)) from err
            check_label(label, label_path, image.shape, image_path)
            check_label_values(label, label_path, spec)
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
