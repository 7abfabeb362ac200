"""`.leanseg` bundles: a graph model and its card in one file (`leanseg import-model`).

A safetensors file: the IR graph's weights as tensors, and in its metadata the graph as JSON
(`engine.frontends.ir_file`) and the card. Opening one runs no code from it and unpickles nothing.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from safetensors import safe_open
from safetensors.torch import save_file

from ..engine.frontends.ir import FrontendError
from ..engine.frontends.ir_file import graph_from_data, graph_to_data
from ..io.outputs import FILE_MODE, new_temp_file
from .card import CardError, card_from_json
from .checkpoint import CheckpointError, LoadedModel
from .graph_card import graph_model_with_card
from .graph_model import GraphModel

GRAPH_KEY = "leanseg_graph"
CARD_KEY = "leanseg_card"


def save_bundle(loaded: LoadedModel, path: Path) -> Path:
    """Write a graph model (from a .pt2/.onnx) and its card to one `.leanseg` file, atomically."""
    model = loaded.model
    if not isinstance(model, GraphModel):
        raise CheckpointError(f"{loaded.path}: already a leanseg checkpoint; bundles hold .pt2/.onnx graphs")
    data, tensors = graph_to_data(model.net)
    card = json.loads(loaded.info.provenance.get("card_json", "{}"))
    metadata = {GRAPH_KEY: json.dumps(data), CARD_KEY: json.dumps(card),
                "source_format": str(loaded.info.provenance.get("format", ""))}
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = new_temp_file(path)
    os.close(fd)
    try:
        save_file({k: v.cpu() for k, v in tensors.items()}, tmp, metadata=metadata)
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load_bundle(path: Path) -> LoadedModel:
    """The model a `.leanseg` bundle holds; CheckpointError naming the file and the problem."""
    try:
        with safe_open(str(path), framework="pt") as handle:
            metadata = handle.metadata() or {}
            tensors = {k: handle.get_tensor(k) for k in handle.keys()}
        data = json.loads(metadata[GRAPH_KEY])
        card = card_from_json(json.loads(metadata.get(CARD_KEY, "{}")) or {"card_version": 1}, f"{path} (card)")
        net = graph_from_data(data, tensors)
    except (CardError, FrontendError) as err:
        raise CheckpointError(f"{path}: {err}") from None
    except (OSError, ValueError, KeyError, TypeError, RuntimeError) as err:
        raise CheckpointError(f"{path}: not a readable .leanseg bundle: {type(err).__name__}: {err}") from None
    loaded = graph_model_with_card(net, card, path, "bundle")
    return loaded
