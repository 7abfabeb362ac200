"""Property-based: checkpoint metadata, the batch manifest and size strings parse or raise the project's
error, nothing else escapes, and a model file cannot make loading allocate much before it is refused
(issue 18)."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import save_file

from leanseg.core.jobs.manifest import JOURNAL_NAME, MANIFEST_NAME, Manifest, ManifestError
from leanseg.core.memory import parse_bytes
from leanseg.core.model import MobileUNet
from leanseg.core.model.checkpoint import CheckpointError, default_info, load_checkpoint, save_checkpoint

from .conftest import TINY_MOBILE

EXAMPLES = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
JSON = st.recursive(st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=6), inner, max_size=5),
                    max_leaves=12)
ALLOCATION_BOUND = 150_000_000  # bytes of resident memory one refused or loaded tiny checkpoint may add


def _tiny_checkpoint() -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as folder:
        path = save_checkpoint(Path(folder) / "tiny.safetensors", MobileUNet(TINY_MOBILE).eval(),
                               default_info(TINY_MOBILE))
        from safetensors import safe_open

        with safe_open(str(path), "pt") as handle:
            return json.loads(handle.metadata()["leanseg"]), {k: handle.get_tensor(k) for k in handle.keys()}


META, TENSORS = _tiny_checkpoint()
FIELDS = ["format_version", "class_names", "class_colours", "mean", "std", "ignore_index", "provenance", "config"]
CONFIG_FIELDS = ["num_classes", "in_channels", "width", "encoder_table", "stem_channels", "decoder_channels",
                 "decoder_expansion", "kind"]


def _peak_rss() -> int:
    text = Path("/proc/self/status").read_text()
    return int(text.split("VmHWM:")[1].split()[0]) * 1024


def _reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")


def _load(meta: Any) -> None:
    """load_checkpoint on the tiny weights with `meta` as the leanseg metadata: loads, or CheckpointError;
    either way resident memory rises by less than ALLOCATION_BOUND."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "m.safetensors"
        text = meta if isinstance(meta, str) else json.dumps(meta)
        save_file(TENSORS, str(path), metadata={"leanseg": text})
        _reset_peak()
        before = _peak_rss()
        try:
            load_checkpoint(path)
        except CheckpointError as err:
            assert str(path) in str(err)
        assert _peak_rss() - before < ALLOCATION_BOUND


@EXAMPLES
@given(st.sampled_from(FIELDS), JSON)
def test_any_value_in_any_metadata_field(field: str, value: Any) -> None:
    _load({**META, field: value})


@EXAMPLES
@given(st.sampled_from(CONFIG_FIELDS), JSON | st.integers(0, 10**12))
def test_any_value_in_any_config_field(field: str, value: Any) -> None:
    _load({**META, "config": {**META["config"], field: value}})


@EXAMPLES
@given(st.text(max_size=40) | JSON.map(json.dumps))
def test_any_metadata_text(text: str) -> None:
    _load(text)


def test_deeply_nested_metadata_is_refused() -> None:
    _load("[" * 100_000 + "]" * 100_000)


@EXAMPLES
@given(st.text(max_size=30))
def test_parse_bytes_takes_any_text(text: str) -> None:
    try:
        value = parse_bytes(text)
    except ValueError as err:
        assert "size" in str(err)
    else:
        assert isinstance(value, int) and value >= 1


@EXAMPLES
@given(st.decimals(min_value="0.001", max_value="1000000", places=3),
       st.sampled_from(["", "B", "KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB", "k", "m", "g", "t"]),
       st.sampled_from(["", " "]))
def test_parse_bytes_reads_what_people_write(number: Any, unit: str, space: str) -> None:
    scale = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "KiB": 2**10, "MiB": 2**20,
             "GiB": 2**30, "TiB": 2**40, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}[unit]
    expected = int(number * scale)
    text = f"{number}{space}{unit}"
    if expected < 1:
        with pytest.raises(ValueError):
            parse_bytes(text)
    else:
        assert parse_bytes(text) == expected


FINGERPRINT = {"model": "m.safetensors", "sha256": "0" * 64, "precision": "fp32"}
MANIFEST = {"format": "leanseg-batch-manifest/1", "fingerprint": FINGERPRINT, "class_names": ["a", "b"],
            "images": {"x.png": {"source": "x.png", "status": "ok", "outputs": {
                "labels": {"path": "x_labels.png", "bytes": 10, "blake2b": ""}}}}, "pending": {}, "owned": []}


def _open_manifest(text: str, journal: str = "") -> None:
    """Manifest.open on a folder holding `text` as manifest.json: opens, or ManifestError."""
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / MANIFEST_NAME).write_text(text)
        if journal:
            (Path(folder) / JOURNAL_NAME).write_text(journal)
        try:
            Manifest.open(Path(folder), FINGERPRINT, ("a", "b")).close()
        except ManifestError as err:
            assert folder in str(err)


@EXAMPLES
@given(st.sampled_from(sorted(MANIFEST)), JSON)
def test_manifest_with_any_value_in_any_field(field: str, value: Any) -> None:
    _open_manifest(json.dumps({**MANIFEST, field: value}))


@EXAMPLES
@given(JSON)
def test_manifest_of_any_json(value: Any) -> None:
    _open_manifest(json.dumps(value))


@EXAMPLES
@given(st.sampled_from(["source", "status", "outputs", "width", "seconds", "class_fraction"]), JSON)
def test_manifest_record_with_any_value(field: str, value: Any) -> None:
    record = {**MANIFEST["images"]["x.png"], field: value}  # type: ignore[index]
    _open_manifest(json.dumps({**MANIFEST, "images": {"x.png": record}}))
