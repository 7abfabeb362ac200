"""--model NAME: a path, or an installed model by its file's name or by the name `leanseg models` shows (its
card's). `find_model` is the one lookup every --model goes through (segment, eval, video, batch, profile, the app):
`catalog.model_path_argument` finds a bare name as an installed file (`unet`, `unet.leanseg`); what it leaves
unresolved is looked up among the cards' names, with a suggestion when none matches.
"""
from __future__ import annotations

import difflib
from pathlib import Path

from .catalog import InstalledModel, installed_models, model_path_argument


def find_model(text: str | Path) -> Path:
    """The model file a --model value names: the path when it exists or has a folder part (`nets/v3.onnx`); else, for a
    bare name, the installed model of that file name or stem (the user folder's first), else of that card name.

    Raises ModelNameError (a ValueError) when no installed model has the name, or several do."""
    path = model_path_argument(str(text))
    if path.exists() or path.parent != Path("."):
        return path
    return installed_model_named(str(path))


class ModelNameError(ValueError):
    """No installed model has that name, or several do; the message says which to give instead."""


def installed_model_named(name: str) -> Path:
    """The one installed model whose card name is `name` (case-insensitively when no exact match).

    Raises ModelNameError naming the files when several share it, or suggesting a close name when none has it."""
    models = installed_models()
    matches = [model for model in models if model.name == name]
    if not matches:
        matches = [model for model in models if model.name.casefold() == name.casefold()]
    if len(matches) == 1:
        return matches[0].path
    if matches:
        files = ", ".join(str(model.path) for model in matches)
        stems = " or ".join(model.path.stem for model in matches)
        raise ModelNameError(f"{name}: {len(matches)} installed models have that name ({files}); "
                             f"give the file's name instead ({stems})")
    raise ModelNameError(f"{name}: no such file, nor an installed model of that name{_did_you_mean(name, models)} "
                         f"(`leanseg models` lists them; `leanseg import-model` installs one)")


def _did_you_mean(name: str, models: list[InstalledModel]) -> str:
    """'; did you mean myunet (unet.leanseg)?' for the closest file stem or card name, or ''."""
    by_name: dict[str, InstalledModel] = {}
    for model in models:
        by_name.setdefault(model.path.stem, model)
        by_name.setdefault(model.name, model)
    close = difflib.get_close_matches(name, list(by_name), n=1)
    if not close:
        return ""
    model = by_name[close[0]]
    return f"; did you mean {close[0]} ({model.path.name})?"
