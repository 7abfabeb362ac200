"""A batch's per-image records and their strict reading from JSON (manifest.json, its journal).

Every field's type is checked when read, so a damaged or hand-edited manifest is refused with a
message naming the field (ValueError, turned into ManifestError by the manifest), never a crash
later while resuming or writing summary.csv.
"""
from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field, fields
from pathlib import PurePosixPath
from typing import Any

STATUSES = ("ok", "error")
_HEX = re.compile(r"^[0-9a-f]*$")


@dataclass(frozen=True)
class OutputFile:
    path: str  # relative to the output folder, '/'-separated
    bytes: int  # size when written; a different size on disk means damaged
    blake2b: str = ""  # checksum when written (io.outputs.content_digest); "" in manifests from before checksums

    @classmethod
    def from_json(cls, data: Any) -> OutputFile:
        """Read strictly; ValueError naming the bad field."""
        _known_keys(data, cls, "an output")
        digest = data.get("blake2b", "")
        if not isinstance(digest, str) or not _HEX.match(digest):
            raise ValueError(f"output checksum {digest!r} is not hex text")
        return cls(relative_path(data.get("path"), "output path"), _count(data.get("bytes"), "output bytes"), digest)


@dataclass
class ImageRecord:
    """What happened to one input; the manifest's unit and one row of summary.csv."""

    source: str  # input path relative to the input folder, '/'-separated (the manifest key)
    status: str  # "ok" | "error"
    error: str = ""  # why it failed, naming the file
    note: str = ""  # what reading did to the image, as `segment` says it ("first of 3 pages"); "; "-separated
    input_bytes: int = 0  # the input's size and mtime when read: a changed input is redone
    input_mtime_ns: int = 0
    width: int = 0
    height: int = 0
    seconds: float = 0.0  # inference time
    peak_bytes: int = 0  # peak memory while inferring
    device: str = ""
    peak_device: str = ""  # where peak_bytes was measured: the segmenter's device, even after a CPU fallback
    class_fraction: list[float] = field(default_factory=list)  # share of pixels per class
    outputs: dict[str, OutputFile] = field(default_factory=dict)  # kind (labels|overlay|probs) -> file

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> ImageRecord:
        """Read strictly; ValueError naming the bad field."""
        _known_keys(data, cls, "a record")
        source = relative_path(data.get("source"), "record source")
        status = data.get("status")
        if status not in STATUSES:
            raise ValueError(f"{source}: status {status!r}, expected one of {', '.join(STATUSES)}")
        values: dict[str, Any] = {"source": source, "status": status}
        for name in ("error", "note", "device", "peak_device"):
            values[name] = _text(data.get(name, ""), f"{source}: {name}")
        for name in ("input_bytes", "input_mtime_ns", "width", "height", "peak_bytes"):
            values[name] = _count(data.get(name, 0), f"{source}: {name}")
        values["seconds"] = _number(data.get("seconds", 0.0), f"{source}: seconds")
        fractions = data.get("class_fraction", [])
        if not isinstance(fractions, list):
            raise ValueError(f"{source}: class_fraction is not a list")
        values["class_fraction"] = [_number(x, f"{source}: class_fraction") for x in fractions]
        outputs = data.get("outputs", {})
        if not isinstance(outputs, dict):
            raise ValueError(f"{source}: outputs is not an object")
        values["outputs"] = {_text(kind, "output kind"): OutputFile.from_json(value) for kind, value in outputs.items()}
        return cls(**values)


def relative_path(value: Any, what: str) -> str:
    """A '/'-separated path inside a folder: not absolute, no '..', not empty."""
    if not isinstance(value, str) or not value or value.startswith("/") or "\x00" in value:
        raise ValueError(f"{what} {value!r} is not a relative path")
    if ".." in PurePosixPath(value).parts:
        raise ValueError(f"{what} {value!r} leaves its folder")
    return value


def relative_paths(value: Any, what: str) -> list[str]:
    if not isinstance(value, list):
        raise ValueError(f"{what} is not a list")
    return [relative_path(item, what) for item in value]


def _known_keys(data: Any, cls: type, what: str) -> None:
    if not isinstance(data, dict):
        raise ValueError(f"{what} is not a JSON object")
    unknown = set(data) - {f.name for f in fields(cls)}
    if unknown:
        raise ValueError(f"{what} has unknown fields {', '.join(sorted(map(str, unknown)))}")


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{what} {value!r} is not text")
    return value


def _count(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what} {value!r} is not a whole number >= 0")
    return value


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{what} {value!r} is not a finite number")
    return float(value)
