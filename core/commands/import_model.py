"""`leanseg import-model SRC [--card CARD] [--out MODEL.leanseg]`: a `.pt2` or `.onnx` graph and its card in
one `.leanseg` file (weights as safetensors, graph as JSON) that the app and `--model` open directly.

Without --card the card beside SRC (NAME.json) is used, else the stated defaults; the command says which
and what it assumed. Without --out the bundle goes to the user model folder, where `leanseg models` and
the app find it.
"""
from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from ..model.bundle import save_bundle
from ..model.card import CardError, ModelCard, card_for, card_path_for, default_input, read_card
from ..model.catalog import user_models_dir
from ..model.checkpoint import CheckpointError, LoadedModel
from ..model.sources import describe, detect_format, load_graph
from . import SUMMARIES
from .common import CommandError, report_error
from .options import HELP_FORMATTER


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("import-model", help=SUMMARIES["import-model"],
                            description=__doc__, formatter_class=HELP_FORMATTER)
    parser.add_argument("source", type=Path, metavar="SRC", help="the graph: a torch.export .pt2 or an .onnx")
    parser.add_argument("--card", type=Path, default=None, metavar="CARD.json",
                        help="its model card (default: SRC's NAME.json beside it, else the stated defaults)")
    parser.add_argument("--out", type=Path, default=None, metavar="MODEL.leanseg",
                        help="the bundle to write (default: NAME.leanseg in the user model folder, "
                             f"{user_models_dir()})")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        loaded, card = import_graph(args.source, args.card)
        out = args.out or user_models_dir() / f"{args.source.stem}.leanseg"
        if out.suffix.lower() != ".leanseg":
            raise CommandError(f"--out {out}: a bundle's name ends in .leanseg, e.g. {out.with_suffix('.leanseg')}")
        if out.exists() and not args.overwrite:
            raise CommandError(f"{out} exists; pass --overwrite to replace it")
    except CommandError as err:
        return report_error(err)
    print(assumptions(args.source, card, loaded))
    try:
        save_bundle(loaded, out)
    except (CheckpointError, OSError) as err:
        return report_error(CommandError(f"{out}: cannot write the bundle: {err}"))
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB): {describe(loaded)}")
    return 0


def import_graph(source: Path, card_path: Path | None) -> tuple[LoadedModel, ModelCard]:
    """The graph in `source` with its card (from `card_path`, beside it, or the defaults), checked against
    each other; CommandError naming the file and the problem."""
    try:
        if source.is_dir():
            raise CheckpointError(f"{source}: is a folder; import-model takes a .pt2 or an .onnx file")
        if not source.is_file():
            raise CheckpointError(f"{source}: no such file")
        kind = detect_format(source)
        if kind == "leanseg":
            raise CheckpointError(f"{source}: a leanseg checkpoint, which --model opens as it is; to have it by "
                                  f"name (--model {source.stem}, the app's File > Installed models) copy it into the "
                                  f"user model folder, {user_models_dir()}; import-model takes a .pt2 or an .onnx "
                                  "graph")
        if kind == "bundle":
            raise CheckpointError(f"{source}: a .leanseg bundle already; import-model takes a .pt2 or an .onnx graph")
        card = read_card(card_path) if card_path is not None else card_for(source)
        if not card.name:
            card = replace(card, name=source.stem)
        return load_graph(source, kind, card), card
    except (CheckpointError, CardError) as err:
        raise CommandError(str(err)) from None


def assumptions(source: Path, card: ModelCard, loaded: LoadedModel) -> str:
    """What the bundle's card says and, for a missing card or missing keys, what was assumed."""
    info, config = loaded.info, loaded.info.config
    multiple = getattr(config, "size_multiple", 0)
    probed = f"size multiple {multiple} (from a probe)" if not card.size_multiple else f"size multiple {multiple}"
    if card.source == "defaults":
        default_names = (", ".join(info.class_names) if getattr(config, "one_channel", False)  # a binary net
                         else f"class 0..{config.num_classes - 1}")
        return (f"no card beside {source.name} (looked for {card_path_for(source).name}): assumed default class "
                f"names ({default_names}), a fixed palette, {default_input(config.in_channels)}, "
                "logits; "
                f"{config.num_classes} classes (from the graph), {probed}")
    assumed = [text for missing, text in ((not card.classes, "default class names"),
                                          (not card.colours, "a fixed palette")) if missing]
    tail = f"; assumed {', '.join(assumed)}" if assumed else ""
    order = "grey input" if config.in_channels == 1 else card.channel_order  # one channel has no order
    return (f"card {card.source}: {config.num_classes} classes, mean {list(info.mean)}, std {list(info.std)}, "
            f"{order}, {card.output_kind}, {probed}{tail}")
