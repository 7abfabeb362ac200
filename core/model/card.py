"""Model cards: what a graph file (`.pt2`, `.onnx`) does not say, in a JSON file beside it (`NAME.json`).

Version 1, as `shared/zoo/build.py` writes it (later versions may add keys; unknown keys are kept):

    {"card_version": 1, "name": "...", "architecture": "...", "classes": ["road", ...],
     "input": {"channels": 3, "range": "0..1 RGB, then normalised", "mean": [...], "std": [...],
               "size_multiple": 32},
     "output": "logits (1, classes, height, width)", "weights": "..."}

Optional keys leanseg reads: "colours" ([[r, g, b], ...] per class), "input.channel_order" ("RGB" or
"BGR"), and "output" starting with "probabilities" for a net that ends in a softmax. Without a card
the defaults below apply, and the app says so.
"""
from __future__ import annotations

import colorsys
import difflib
import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

CARD_VERSION = 1
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
GREY_MEAN = (0.5,)  # a graph without a card and with other than 3 channels: each channel centred ...
GREY_STD = (0.25,)  # ... and spread over about -2..2
OUTPUT_KINDS = ("logits", "probabilities")
CHANNEL_ORDERS = ("RGB", "BGR")
GOLDEN_RATIO_CONJUGATE = 0.6180339887498949
TOP_KEYS = ("card_version", "name", "architecture", "classes", "colours", "input", "output", "weights")
INPUT_KEYS = ("channels", "range", "mean", "std", "size_multiple", "channel_order")
# The keys that change the result: a near miss of one of these is refused (a near miss of a free-text key,
# "weight" or "architecure", is kept unread like any other key this version does not read).
READ_KEYS = ("card_version", "classes", "colours", "input", "output")
READ_INPUT_KEYS = ("channels", "mean", "std", "size_multiple", "channel_order")
# Names a card writer reaches for first for the classes or their colours.
KEY_SLIPS = {"class_names": "classes", "labels": "classes", "names": "classes", "palette": "colours"}
KEY_SPELLINGS = {"colors": "colours"}  # read as the key they spell


class CardError(ValueError):
    """A card that cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class ModelCard:
    name: str = ""  # shown in the app's status bar and `leanseg models`
    architecture: str = ""  # free text
    classes: tuple[str, ...] = ()  # one per output channel; empty: "class i"
    colours: tuple[tuple[int, int, int], ...] = ()  # RGB per class; empty: a fixed palette
    channels: int = 3  # input channels (1 grey, 3 colour)
    mean: tuple[float, ...] = IMAGENET_MEAN  # normalisation of [0, 1] pixels
    std: tuple[float, ...] = IMAGENET_STD
    size_multiple: int = 0  # height and width must divide by it; 0: found by a probe
    channel_order: str = "RGB"  # RGB | BGR
    output_kind: str = "logits"  # logits | probabilities
    source: str = "defaults"  # where it came from: a card path, or "defaults"
    extra: dict[str, Any] = field(default_factory=dict)  # keys this version does not read, kept on save

    def __post_init__(self) -> None:
        if self.channels not in (1, 3):
            raise CardError(f"input.channels must be 1 or 3, got {self.channels}")
        if len(self.mean) != self.channels or len(self.std) != self.channels:
            values = "1 value each (a grey input)" if self.channels == 1 else f"{self.channels} values each"
            raise CardError(f"input.mean and input.std need {values}, got {list(self.mean)}, {list(self.std)}")
        if not all(math.isfinite(v) for v in self.mean) or not all(math.isfinite(v) and v > 0 for v in self.std):
            raise CardError(f"input.mean must be finite and input.std finite and > 0, got {list(self.mean)}, "
                            f"{list(self.std)}")
        if max(map(abs, self.mean)) > 1 or max(self.std) > 1:
            raise CardError(f"input.mean and input.std are on the 0..1 pixel scale (ImageNet's mean {IMAGENET_MEAN}), "
                            f"got {list(self.mean)}, {list(self.std)}: on the 0..255 scale, divide both by 255")
        if not 0 <= self.size_multiple <= 1024:
            raise CardError(f"input.size_multiple must be in 0..1024, got {self.size_multiple}")
        if self.channel_order not in CHANNEL_ORDERS:
            raise CardError(f"input.channel_order must be one of {CHANNEL_ORDERS}, got {self.channel_order!r}")
        if self.output_kind not in OUTPUT_KINDS:
            raise CardError(f"output must start with one of {OUTPUT_KINDS}, got {self.output_kind!r}")
        if len(self.classes) > 255:
            raise CardError(f"{len(self.classes)} classes; labels are 8-bit, at most 255")
        for colour in self.colours:
            if len(colour) != 3 or not all(0 <= c <= 255 for c in colour):
                raise CardError(f"colours must be [r, g, b] with values 0..255, got {list(colour)}")
        if self.colours and self.classes and len(self.colours) != len(self.classes):
            raise CardError(f"{len(self.classes)} classes but {len(self.colours)} colours")

    def class_names(self, count: int) -> tuple[str, ...]:
        return self.classes or tuple(f"class {i}" for i in range(count))

    def class_colours(self, count: int) -> tuple[tuple[int, int, int], ...]:
        return self.colours or default_palette(count)

    def to_json(self) -> dict[str, Any]:
        """The card as version 1 JSON (with leanseg's optional keys where they are not the defaults)."""
        card: dict[str, Any] = {**self.extra, "card_version": CARD_VERSION, "name": self.name,
                                "architecture": self.architecture, "classes": list(self.classes)}
        if self.colours:
            card["colours"] = [list(c) for c in self.colours]
        card["input"] = {**self.extra.get("input", {}), "channels": self.channels, "mean": list(self.mean),
                         "std": list(self.std), "size_multiple": self.size_multiple,
                         "channel_order": self.channel_order}
        output = str(self.extra.get("output", ""))
        card["output"] = output if output.startswith(self.output_kind) else \
            f"{self.output_kind} (1, classes, height, width)"
        return card


def default_input(channels: int) -> str:
    """The input a graph without a card is given, in words: ImageNet's for 3 channels, else mean 0.5 / std 0.25 on
    every channel (graph_card gives any other channel count those)."""
    if channels == 3:
        return "ImageNet mean/std, RGB input"
    kind = "grey input" if channels == 1 else f"{channels}-channel input"
    return f"{kind}, mean {GREY_MEAN[0]} / std {GREY_STD[0]}"


def default_palette(count: int) -> tuple[tuple[int, int, int], ...]:
    """A fixed palette, the same colour for the same class index everywhere: hues a golden angle apart
    (each new class lands in the widest gap left), with saturation cycling over two levels and brightness
    over three, so classes of close hue differ in the others (12 classes: no two closer than 80 in RGB)."""
    colours = []
    for index in range(count):
        hue = (index * GOLDEN_RATIO_CONJUGATE) % 1.0
        saturation = (0.9, 0.5)[index % 2]
        value = (0.95, 0.75, 0.55)[index % 3]
        red, green, blue = colorsys.hsv_to_rgb(hue, saturation, value)
        colours.append((round(255 * red), round(255 * green), round(255 * blue)))
    return tuple(colours)


def card_path_for(model_path: Path) -> Path:
    """NAME.json beside NAME.pt2 / NAME.onnx."""
    return model_path.with_suffix(".json")


def card_from_json(raw: Any, source: str) -> ModelCard:
    """Parse a card's JSON value; raises CardError naming `source` and the field."""
    if not isinstance(raw, dict):
        raise CardError(f"{source}: a card is a JSON object, got {type(raw).__name__}")
    version = raw.get("card_version")
    if version is None:
        raise CardError(f'{source}: no card_version; a card starts {{"card_version": {CARD_VERSION}, ...}}')
    if not isinstance(version, int) or version < 1:
        raise CardError(f"{source}: card_version must be an integer >= 1, got {version!r}")
    inputs = raw.get("input", {})
    if not isinstance(inputs, dict):
        raise CardError(f"{source}: input must be an object")
    _check_key_slips(raw, inputs, source)
    colours: Any = raw.get("colours", raw.get("colors", []))
    try:
        output = str(raw.get("output", "logits"))
        return ModelCard(
            name=str(raw.get("name", "")), architecture=str(raw.get("architecture", "")),
            classes=tuple(str(c) for c in _list(raw.get("classes", []), "classes", "a list of class names")),
            colours=tuple(_numbers(c, f"colours[{i}]", int, "a list of 3 integers 0..255")  # type: ignore[misc]
                          for i, c in enumerate(_list(colours, "colours", "a list of [R, G, B] lists"))),
            channels=_whole(inputs.get("channels", 3), "input.channels"),
            mean=_numbers(inputs.get("mean", IMAGENET_MEAN), "input.mean", float, "a list of numbers"),
            std=_numbers(inputs.get("std", IMAGENET_STD), "input.std", float, "a list of numbers"),
            size_multiple=_whole(inputs.get("size_multiple", 0), "input.size_multiple"),
            channel_order=str(inputs.get("channel_order", "RGB")).upper(),
            output_kind=next((kind for kind in OUTPUT_KINDS if output.lower().startswith(kind)), output),
            source=source,
            extra={k: v for k, v in raw.items() if k not in ("classes", "colours", *KEY_SPELLINGS)},
        )
    except CardError as err:
        raise CardError(f"{source}: {err}") from None
    except (TypeError, ValueError) as err:
        raise CardError(f"{source}: invalid card: {err}") from None


def _list(value: Any, name: str, what: str) -> list[Any]:
    """`value` when it is a JSON list; else CardError('{name} must be {what}, got ...')."""
    if not isinstance(value, (list, tuple)):
        raise CardError(f"{name} must be {what}, got {json.dumps(value)}")
    return list(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _numbers(value: Any, name: str, kind: type, what: str) -> tuple[Any, ...]:
    """A JSON list of numbers as a tuple of `kind`; else CardError naming the field, what it must be and got."""
    if not all(_is_number(v) for v in _list(value, name, what)):
        raise CardError(f"{name} must be {what}, got {json.dumps(value)}")
    return tuple(kind(v) for v in value)


def _whole(value: Any, name: str) -> int:
    """A JSON whole number; else CardError naming the field."""
    if not _is_number(value) or not float(value).is_integer():
        raise CardError(f"{name} must be a whole number, got {json.dumps(value)}")
    return int(value)


def _check_key_slips(raw: dict[str, Any], inputs: dict[str, Any], source: str) -> None:
    """A key that is a slip of one leanseg reads would otherwise be kept unread and its default used silently."""
    for key in raw:
        if key in TOP_KEYS or key in KEY_SPELLINGS:
            continue
        if key in INPUT_KEYS:
            raise CardError(f'{source}: "{key}" belongs inside "input": {{"input": {{"{key}": ...}}}}')
        meant = KEY_SLIPS.get(key) or next(iter(difflib.get_close_matches(key, READ_KEYS, n=1, cutoff=0.8)), None)
        if meant is not None and meant not in raw:
            raise CardError(f'{source}: unknown key "{key}"; did you mean "{meant}"?')
    for key in inputs:
        meant = next(iter(difflib.get_close_matches(key, READ_INPUT_KEYS, n=1, cutoff=0.8)), None)
        if key not in INPUT_KEYS and meant is not None and meant not in inputs:
            raise CardError(f'{source}: unknown key "input.{key}"; did you mean "input.{meant}"?')


def read_card(path: Path) -> ModelCard:
    """The card at `path`; raises CardError."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CardError(f"{path}: no such card file") from None
    except IsADirectoryError:
        raise CardError(f"{path}: is a folder, not a card file (NAME.json)") from None
    except OSError as err:
        raise CardError(f"{path}: cannot read the card: {err.strerror or err}") from None
    except (UnicodeDecodeError, ValueError) as err:
        raise CardError(f"{path}: not a readable JSON card: {err}") from None
    return card_from_json(raw, str(path))


def card_for(model_path: Path) -> ModelCard:
    """The card beside a graph file, or the defaults (source 'defaults') when there is none."""
    path = card_path_for(model_path)
    return read_card(path) if path.is_file() else ModelCard(name=model_path.stem)


def write_card(card: ModelCard, path: Path) -> Path:
    """Save `card` as version 1 JSON (atomically)."""
    from ..io.outputs import atomic_write_bytes

    atomic_write_bytes(path, (json.dumps(card.to_json(), indent=2) + "\n").encode())
    return path


def with_classes(card: ModelCard, names: list[str]) -> ModelCard:
    return replace(card, classes=tuple(names))
