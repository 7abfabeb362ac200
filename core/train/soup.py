"""A uniform weight average of checkpoints of one model ("model soup", Wortsman et al. 2022): the fine-tunes
that start from the same weights land in one basin, and their average can beat each of them."""
from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import torch

from ..model.checkpoint import LoadedModel, load_checkpoint
from ..model.config import config_to_dict

METHOD = "uniform average of the float tensors (weights and batch-norm statistics); integer ones from the first file"


def average_checkpoints(paths: Sequence[str | Path], command: str = "") -> LoadedModel:
    """The average of `paths` (two or more checkpoints of one architecture and class list; else ValueError
    naming the file that differs). Its provenance lists each file's name, SHA-256 and own provenance."""
    if len(paths) < 2:
        raise ValueError(f"a weight average needs two or more checkpoints, got {len(paths)}")
    loaded = [load_checkpoint(path) for path in paths]
    first = loaded[0]
    for other in loaded[1:]:
        if config_to_dict(other.info.config) != config_to_dict(first.info.config):
            raise ValueError(f"{other.path}: its model {config_to_dict(other.info.config)} is not {first.path}'s "
                             f"{config_to_dict(first.info.config)}")
        if tuple(other.info.class_names) != tuple(first.info.class_names):
            raise ValueError(f"{other.path}: its classes {list(other.info.class_names)} are not {first.path}'s "
                             f"{list(first.info.class_names)}")
    states = [item.model.state_dict() for item in loaded]
    averaged = {}
    for name, tensor in states[0].items():
        if tensor.is_floating_point():
            total = torch.stack([state[name].double() for state in states]).mean(dim=0)
            averaged[name] = total.to(tensor.dtype)
        else:
            averaged[name] = tensor
    first.model.load_state_dict(averaged)
    ingredients = [{"file": str(path), "sha256": hashlib.sha256(Path(path).read_bytes()).hexdigest(),
                    "provenance": item.info.provenance} for path, item in zip(paths, loaded)]
    provenance = {"data": first.info.provenance.get("data", ""), "method": METHOD, "command": command,
                  "soup_of": ingredients}
    return LoadedModel(model=first.model, info=replace(first.info, provenance=provenance))
