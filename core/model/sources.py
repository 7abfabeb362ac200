"""Open any model file leanseg takes: a leanseg checkpoint, a `torch.export` archive or an ONNX graph.

The format is read from the file's first bytes, not its suffix. Graph files become a `GraphModel`
(the front end's IR graph, padded to the size multiple and cropped back) with a `ModelInfo` built from
the card beside the file (or stated defaults); the class count always comes from the graph's output,
found by running it once on a small input. Nothing from a file is ever executed: `.pt2` archives are
read weights-only (`pt2_file`), ONNX is parsed as protobuf.
"""
from __future__ import annotations

import struct
import zipfile
from pathlib import Path

from torch import fx

from .card import CardError, ModelCard, card_for, default_input
from .checkpoint import CheckpointError, LoadedModel, load_checkpoint
from .graph_card import graph_model_with_card
from .pt2_file import UnsafeModelFile, is_pt2_archive, load_exported_program

FORMATS = ("leanseg", "pt2", "onnx", "bundle")
MODEL_SUFFIXES = (".safetensors", ".pt2", ".onnx", ".leanseg")
NOT_A_MODEL = "not a model file leanseg opens (.safetensors checkpoint, .pt2, .onnx or .leanseg)"


def detect_format(path: Path) -> str:
    """'leanseg' | 'bundle' | 'pt2' | 'onnx' from the file's content; raises CheckpointError otherwise."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(16)
    except OSError as err:
        raise CheckpointError(f"{path}: cannot read: {err.strerror or err}") from None
    if not head:
        raise CheckpointError(f"{path}: file is empty (0 bytes)")
    if len(head) < 8 and path.suffix.lower() in MODEL_SUFFIXES:
        raise CheckpointError(f"{path}: file is truncated ({len(head)} bytes)")
    if len(head) < 8:
        return _refuse(path, NOT_A_MODEL)
    if head[:4] == b"PK\x03\x04":
        if not zipfile.is_zipfile(path):
            return _refuse(path, "a zip archive, but truncated or damaged (its table of contents is missing)")
        if is_pt2_archive(path):
            return "pt2"
        torch_save = is_torch_save(path)
        if torch_save and (path.name == "last.pt" or (path.parent / "history.json").is_file()):
            return _refuse(path, "a `leanseg train` run's resume state, not a model: give the run's weights, "
                                 f"{path.parent / 'best.safetensors'} (written at its first validation), or "
                                 "train's --export copy of them")
        if torch_save:
            return _refuse(path, "a torch.save file (a state dict or a pickled module), which leanseg does not open: "
                                 "a state dict holds weights without the network, and unpickling a module runs its "
                                 "code; export the model with torch.export or torch.onnx (README, 'Exporting a "
                                 "PyTorch model')")
        return _refuse(path, "a zip archive, but not a torch.export .pt2")
    header_size = struct.unpack("<Q", head[:8])[0]
    if head[8:9] == b"{" and 0 < header_size < 100_000_000:
        return "bundle" if _is_bundle(path) else "leanseg"
    if head[:1] in (b"\x08", b"\x0a", b"\x12", b"\x1a", b"\x22", b"\x3a", b"\x42", b"\x52"):
        return "onnx"  # protobuf field tags of ModelProto (ir_version, opset_import, producer, graph...)
    if path.suffix.lower() == ".json" and head.lstrip()[:1] == b"{":
        return _refuse(path, "a JSON file, such as a model card; give the model file it describes "
                             "(NAME.pt2 or NAME.onnx beside NAME.json), which reads the card itself")
    return _refuse(path, NOT_A_MODEL)


def is_model_file(path: Path) -> bool:
    """Whether a file is a model by its content, whatever its name: a .pt2, .safetensors or .leanseg by its
    header; an ONNX file only when it parses as a graph (the ONNX sniff is one byte, which text and RIFF or BMP
    images can share). For routing a file of unknown kind; opening a model names its problem instead."""
    try:
        kind = detect_format(path)
    except CheckpointError:
        return False
    if kind != "onnx":
        return True
    import onnx

    try:
        return len(onnx.load(str(path), load_external_data=False).graph.node) > 0
    except Exception:  # noqa: BLE001 - any parse failure: not an ONNX model, so not a model
        return False


def is_torch_save(path: Path) -> bool:
    """A zip written by torch.save: its pickle is `<archive>/data.pkl`."""
    with zipfile.ZipFile(path) as archive:
        return any(name.endswith("/data.pkl") for name in archive.namelist())


def _refuse(path: Path, reason: str) -> str:
    raise CheckpointError(f"{path}: {reason}")


def _is_bundle(path: Path) -> bool:
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as handle:
            return "leanseg_graph" in (handle.metadata() or {})
    except Exception:  # not readable as safetensors: the checkpoint loader names the problem
        return False


def load_model(path: str | Path) -> LoadedModel:
    """Any model file leanseg opens, as a LoadedModel (CPU, eval); raises CheckpointError naming the file."""
    path = Path(path)
    if path.is_dir():
        raise CheckpointError(f"{path}: is a folder, not a model file (.safetensors, .pt2, .onnx or .leanseg)")
    if not path.is_file():
        raise CheckpointError(f"{path}: no such file")
    kind = detect_format(path)
    if kind == "leanseg":
        return load_checkpoint(path)
    if kind == "bundle":
        from .bundle import load_bundle

        return load_bundle(path)
    try:
        card = card_for(path)
    except CardError as err:
        raise CheckpointError(str(err)) from None
    return load_graph(path, kind, card)


def load_graph(path: Path, kind: str, card: ModelCard) -> LoadedModel:
    """A graph file (kind 'pt2' or 'onnx') with its card, checked against the graph."""
    try:
        net = _import_graph(path, kind)
    except UnsafeModelFile as err:
        raise CheckpointError(f"{path}: refused: {err}") from None
    except (ValueError, RuntimeError, KeyError, IndexError, TypeError, AttributeError) as err:
        first = str(err).splitlines()[0].removeprefix(f"{path.name}: ") if str(err) else type(err).__name__
        raise CheckpointError(f"{path}: {first}") from None  # the front end's message may name the file too
    return graph_model_with_card(net, card, path, kind)


def _import_graph(path: Path, kind: str) -> fx.GraphModule:
    if kind == "pt2":
        from ..engine.frontends.export_lift import lift_exported_program

        return lift_exported_program(load_exported_program(path))
    from ..engine.frontends.onnx_import import import_onnx

    return import_onnx(path)


def describe(loaded: LoadedModel) -> str:
    """One line: name, format, classes, size multiple and where the card came from."""
    info = loaded.info
    provenance = info.provenance
    name = provenance.get("name") or (loaded.path.stem if loaded.path else "model")
    fmt = provenance.get("format", "leanseg")
    card = provenance.get("card")
    if fmt == "bundle":  # the card is stored inside the file: named as `leanseg models` lists it
        card = "bundle"
    elif fmt == "leanseg" and not card:
        card = "checkpoint"
    assumed = default_input(info.config.in_channels).removesuffix(" input")
    tail = f", card: {card}" if card and card != "defaults" else (f", no card: default names, palette, {assumed}"
                                                                    if card else "")
    multiple = getattr(info.config, "size_multiple", 32)
    min_h, min_w = getattr(info.config, "min_size", (0, 0))
    padded = f", padded to at least {min_h or multiple} x {min_w or multiple} px" if min_h or min_w else ""
    bounded = size_range_phrase(info.config)
    return f"{name} ({fmt}, {info.config.num_classes} classes, size multiple {multiple}{padded}{bounded}{tail})"


def size_range_phrase(config: object) -> str:
    """", at most WxH px (width x height) a pass (its export's range)" for a graph exported for a bounded size
    range, else "". Larger images are cut into tiles that fit; the tile plan's line says so when it happens."""
    max_h, max_w = getattr(config, "max_size", (0, 0))
    if not (max_h or max_w):
        return ""
    return f", at most {max_w or 'any'}x{max_h or 'any'} px (width x height) a pass (its export's range)"


def is_zip(path: Path) -> bool:
    return zipfile.is_zipfile(path)
