"""The installed models: the shipped default (assets/models) and the user's model folder, each with its
card summary. Cheap: cards and metadata are read, no graph is run (`leanseg models --check` loads each).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from ..assets import assets_dir
from .card import CardError, ModelCard, card_for, card_from_json
from .checkpoint import CheckpointError, read_info
from .sources import MODEL_SUFFIXES, detect_format

MODELS_DIR_ENV = "LEANSEG_MODELS_DIR"


def user_models_dir() -> Path:
    """`$LEANSEG_MODELS_DIR`, else ~/.local/share/leanseg/models (`leanseg import-model` writes there)."""
    override = os.environ.get(MODELS_DIR_ENV)
    return Path(override).expanduser() if override else Path.home() / ".local" / "share" / "leanseg" / "models"


def shipped_models_dir() -> Path:
    return assets_dir() / "models"


def model_path_argument(text: str) -> Path:
    """`model_names.find_model`'s first step: the path when it exists; else, for a bare name (`tinyunet`,
    `tinyunet.leanseg`), the installed model of that file name or stem, the user folder's before the shipped one's."""
    try:
        path = Path(text).expanduser()
    except RuntimeError:  # ~nosuchuser/...: left as given, and opening it says there is no such file
        return Path(text)
    if path.exists() or path.parent != Path("."):
        return path
    preference = (".leanseg", ".safetensors", ".pt2", ".onnx")  # a bundle carries its card; a bare graph may not
    for folder in (user_models_dir(), shipped_models_dir()):
        candidates = [folder / text] + [folder / f"{text}{suffix}" for suffix in preference]
        found = next((candidate for candidate in candidates if candidate.is_file()), None)
        if found is not None:
            return found
    return path


@dataclass(frozen=True)
class InstalledModel:
    """One model file and what its card or metadata says, without running it."""

    path: Path
    where: str  # "shipped" | "user"
    format: str  # leanseg | bundle | pt2 | onnx
    name: str
    classes: int | None  # None: a graph file with no card (the count comes from a probe when it is opened)
    size_multiple: int | None  # None or 0: found by a probe when opened
    card: str  # where the card came from: "checkpoint", "bundle", a card path, or "defaults"
    problem: str = ""  # why the file cannot be opened ("" when it looks fine)

    def summary(self) -> str:
        """One line: name, format, classes, size multiple, card; or why it cannot be opened (shown beside its path)."""
        if self.problem:
            return f"cannot be opened: {self.problem}"
        classes = "classes from a probe" if self.classes is None else f"{self.classes} classes"
        multiple = f"size multiple {self.size_multiple}" if self.size_multiple else "size multiple from a probe"
        card = "no card: defaults" if self.card == "defaults" else f"card: {self.card}"
        return f"{self.name} ({self.format}, {classes}, {multiple}, {card})"


def installed_models(folders: list[tuple[Path, str]] | None = None) -> list[InstalledModel]:
    """Model files in each (folder, where) pair, default: the shipped and the user folder; sorted by name."""
    folders = folders if folders is not None else [(shipped_models_dir(), "shipped"), (user_models_dir(), "user")]
    found: list[InstalledModel] = []
    for folder, where in folders:
        if folder.is_dir():
            files = sorted(p for p in folder.iterdir() if p.suffix.lower() in MODEL_SUFFIXES and p.is_file())
            found += [describe_file(path, where) for path in files]
    return found


def describe_file(path: Path, where: str = "user") -> InstalledModel:
    """What `path`'s card or metadata says; a file that cannot be read is listed with its problem."""
    try:
        kind = detect_format(path)
        if kind == "leanseg":
            info = read_info(path)
            name = str(info.provenance.get("name") or path.stem)
            multiple = 2 ** getattr(info.config, "depth", 5)  # MobileUNet: stride 32; PlainUNet: 2**depth
            return InstalledModel(path, where, kind, name, info.config.num_classes, multiple, "checkpoint")
        card = _bundle_card(path) if kind == "bundle" else card_for(path)
    except (CheckpointError, CardError) as err:
        problem = str(err).removeprefix(f"{path}: ")
        return InstalledModel(path, where, "?", path.stem, None, None, "", problem)
    classes = len(card.classes) if card.classes else None
    source = "bundle" if kind == "bundle" else card.source
    return InstalledModel(path, where, kind, card.name or path.stem, classes, card.size_multiple or None, source)


def _bundle_card(path: Path) -> ModelCard:
    from safetensors import safe_open

    from .bundle import CARD_KEY

    try:
        with safe_open(str(path), framework="pt") as handle:
            raw = json.loads((handle.metadata() or {}).get(CARD_KEY, "{}")) or {"card_version": 1}
    except (OSError, ValueError) as err:
        raise CheckpointError(f"{path}: not a readable .leanseg bundle: {err}") from None
    return card_from_json(raw, f"{path} (card)")


def display_name(path: Path | None, name: str, file_text: str | None = None) -> str:
    """A model as the app shows it: the file (`file_text`, default its name), after its card's name where that
    says more ("Street U-Net (v3.onnx)")."""
    if path is None:
        return name or "model"
    file_text = path.name if file_text is None else file_text
    return file_text if name in ("", path.name, path.stem) else f"{name} ({file_text})"


def model_classes(described: InstalledModel) -> tuple[tuple[str, ...], tuple[tuple[int, int, int], ...]]:
    """(class names, colours) of a described model file (`describe_file`): from its metadata or card when they
    name the classes (cheap), else by opening it (the count comes from the graph); CheckpointError naming it."""
    path = described.path
    if described.problem:
        raise CheckpointError(f"{path}: {described.problem}")
    if described.format == "leanseg":
        info = read_info(path)
        return info.class_names, info.class_colours
    if described.classes is not None:
        card = _bundle_card(path) if described.format == "bundle" else card_for(path)
        return card.class_names(described.classes), card.class_colours(described.classes)
    from .sources import load_model

    info = load_model(path).info
    return info.class_names, info.class_colours
