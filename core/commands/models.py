"""`leanseg models [--dir DIR] [--check]`: the installed models (the shipped default in assets/models and the
user model folder, $LEANSEG_MODELS_DIR or ~/.local/share/leanseg/models) with their cards' summaries.

By default only cards and metadata are read; --check opens each model (runs its graph on a small input)
and prints what leanseg will use, or why it cannot open it.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from ..model.catalog import InstalledModel, installed_models, shipped_models_dir, user_models_dir
from ..model.checkpoint import CheckpointError
from ..model.sources import describe, load_model
from . import SUMMARIES
from .options import HELP_FORMATTER


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("models", help=SUMMARIES["models"], description=__doc__,
                            formatter_class=HELP_FORMATTER)
    parser.add_argument("--dir", type=Path, default=None, metavar="DIR",
                        help="the user model folder (default: $LEANSEG_MODELS_DIR or ~/.local/share/leanseg/models)")
    parser.add_argument("--check", action="store_true", help="open each model and report what leanseg uses")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    folders = [(shipped_models_dir(), "shipped"), (args.dir or user_models_dir(), "user")]
    models = installed_models(folders)
    failed = 0
    for folder, where in folders:
        print(f"{where}: {folder}" + ("" if folder.is_dir() else " (no such folder)"))
        for model in (m for m in models if m.where == where):
            line, ok = _line(model, args.check)
            failed += not ok
            print(f"  {model.path.name}: {line}")
    if not models:
        print("no models installed; add one with `leanseg import-model MODEL.pt2` (see README, 'Your own model')")
    elif args.check:
        print(f"checked {len(models)}: {len(models) - failed} open, {failed} cannot be opened")
    else:
        print("(read from cards and metadata; --check opens each model)")
    return 1 if failed else 0


def _line(model: InstalledModel, check: bool) -> tuple[str, bool]:
    """The model's summary line (its card's, or with --check what opening it gives) and whether it opens."""
    if not check or model.problem:
        return model.summary(), not model.problem
    try:
        return f"opens: {describe(load_model(model.path))}", True
    except CheckpointError as err:
        return f"cannot be opened: {str(err).removeprefix(f'{model.path}: ')}", False
