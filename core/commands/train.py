"""`leanseg train --data DIR --spec SPEC.json --out RUN_DIR`: train MobileUNet or PlainUNet."""
from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from ..io.outputs import OutputPathError, check_output_file, check_output_folder
from ..jobs.folder_lock import FolderBusyError
from ..train.dataset import CAMVID_SPEC, DatasetError
from ..train.options import MODEL_KINDS, PRECISIONS, TrainConfig
from ..train.run_folder import RUN_FILES, TrainingInterrupted
from . import SUMMARIES
from .common import CommandError, CtrlC, report_error
from .options import HELP_FORMATTER, add_device_option


def register(sub: argparse._SubParsersAction) -> None:
    defaults = TrainConfig(data_dir="", spec_path="", out_dir="")
    p = sub.add_parser("train", help=SUMMARIES["train"], description=__doc__,
                       formatter_class=HELP_FORMATTER)
    p.add_argument("--data", type=Path, required=True, help="folder with train.txt/val.txt or split/images+labels")
    p.add_argument("--spec", type=Path, default=CAMVID_SPEC,
                   help="dataset spec JSON (class names, colours, ignore index; the README's 'Training on your "
                        "own data'); default: CamVid's")
    p.add_argument("--out", type=Path, required=True, help="run folder (resume state, best checkpoint)")
    p.add_argument("--model", choices=MODEL_KINDS, default=defaults.model, help="architecture")
    p.add_argument("--width", type=float, default=defaults.width, help=f"default {defaults.width}")
    p.add_argument("--decoder-channels", type=int, nargs=4, default=None, metavar=("C16", "C8", "C4", "C2"),
                   help="MobileUNet decoder channels at strides 16, 8, 4, 2 (default 96 32 24 16)")
    p.add_argument("--context-dilations", type=int, nargs="+", default=None, metavar="D",
                   help="MobileUNet: one inverted residual per D at stride 32 whose depthwise taps are D apart, "
                        "a wider context before the decoder, e.g. 2 4 (default: none)")
    p.add_argument("--epochs", type=int, default=defaults.epochs, help=f"default {defaults.epochs}")
    p.add_argument("--batch-size", type=int, default=defaults.batch_size, help="images per step")
    p.add_argument("--crop", type=int, nargs=2, default=defaults.crop, metavar=("H", "W"), help="training crop")
    p.add_argument("--lr", type=float, default=defaults.lr, help="peak learning rate (one-cycle schedule)")
    p.add_argument("--precision", choices=PRECISIONS, default=defaults.precision, help="training precision")
    p.add_argument("--checkpointing", action="store_true",
                   help="activation checkpointing of the blocks a cost model picks (estimated peak 0.45x plain)")
    p.add_argument("--seed", type=int, default=defaults.seed, help="random seed (weights, crops, order)")
    add_device_option(p)
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: torch's choice)")
    p.add_argument("--val-every", type=int, default=defaults.val_every, help="validate every N epochs")
    p.add_argument("--limit-images", type=int, default=0, help="use only the first N training pairs (0: all)")
    p.add_argument("--train-splits", default=None,
                   help="comma-separated splits to train on (default train; train,val with --holdout-sequence)")
    p.add_argument("--val-split", default=defaults.val_split,
                   help=f"split that picks the best epoch; 'none': keep the last epoch (default {defaults.val_split})")
    p.add_argument("--holdout-sequence", default="", metavar="SEQ",
                   help="validate on the frames of sequence SEQ (name prefix before '_'), train on the others")
    p.add_argument("--scale-range", type=float, nargs=2, default=defaults.scale_range, metavar=("LOW", "HIGH"),
                   help=f"random rescale before cropping (default {defaults.scale_range[0]} {defaults.scale_range[1]})")
    p.add_argument("--jitter", type=float, default=defaults.jitter, help=f"colour jitter (default {defaults.jitter})")
    p.add_argument("--exposure", type=float, nargs=2, default=defaults.exposure, metavar=("LOW", "HIGH"),
                   help="random exposure change in stops, e.g. -1.5 0.5 for mostly darker (default 0 0: off)")
    p.add_argument("--colour-cast", type=float, default=defaults.colour_cast, metavar="AMOUNT",
                   help="random per-channel gain in [1 - AMOUNT, 1 + AMOUNT], e.g. 0.15 (default 0: off)")
    p.add_argument("--copy-paste", type=float, default=defaults.copy_paste, metavar="P",
                   help="with chance P a crop takes the pixels of the rare classes (below the median frequency) of "
                        "another crop of its batch, e.g. 0.5 (default 0: off)")
    p.add_argument("--class-weighting", type=float, default=defaults.class_weighting,
                   help=f"exponent on median-frequency class weights (default {defaults.class_weighting})")
    p.add_argument("--weight-decay", type=float, default=defaults.weight_decay, help="AdamW weight decay")
    p.add_argument("--ema", type=float, default=defaults.ema_decay, metavar="DECAY",
                   help="keep an EMA of the weights with this decay (e.g. 0.998); it is validated and exported")
    p.add_argument("--label-smoothing", type=float, default=defaults.label_smoothing, help="of the cross-entropy")
    p.add_argument("--lovasz", type=float, default=defaults.lovasz_weight, metavar="WEIGHT",
                   help="add WEIGHT x the Lovász-softmax loss (a surrogate of the mean IoU) to the cross-entropy, "
                        "e.g. 1.0 for a fine-tuning schedule (default 0: off)")
    p.add_argument("--ohem", type=float, default=defaults.ohem_fraction, metavar="FRACTION",
                   help="average the cross-entropy over the hardest FRACTION of each batch's labelled pixels "
                        "(online hard example mining), e.g. 0.25 (default 1: all)")
    p.add_argument("--finetune-full-epochs", type=int, default=defaults.finetune_full_epochs, metavar="N",
                   help="the last N epochs train on full-size crops (--full-crop) at scale 1")
    p.add_argument("--full-crop", type=int, nargs=2, default=defaults.full_crop, metavar=("H", "W"),
                   help="crop of the --finetune-full-epochs")
    p.add_argument("--init-from", type=Path, default=None, metavar="CHECKPOINT",
                   help="start from this leanseg .safetensors checkpoint's weights (same model and classes) "
                        "instead of random ones: a second schedule after a finished run")
    again = p.add_mutually_exclusive_group()
    again.add_argument("--resume", action="store_true",
                       help="continue the run in RUN_DIR from its last.pt (the same options; a new run if none)")
    again.add_argument("--overwrite", action="store_true",
                       help="start over in a RUN_DIR that holds a run: its last.pt, best.safetensors and "
                            "history.json are replaced")
    p.add_argument("--export", type=Path, default=None,
                   help="copy the best checkpoint to this new .safetensors file at the end (never replaces a file)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import torch

    from ..train.loop import train

    if args.threads:
        torch.set_num_threads(args.threads)
    with CtrlC([]) as ctrl_c:  # Ctrl-C stops the training at once; once the run is complete it is ignored
        try:
            config = _config(args)
            _check_outputs(args.out, args.export)
            command = "leanseg " + " ".join(shlex.quote(a) for a in sys.argv[1:]
                                            if a not in ("--resume", "--overwrite"))
            result = train(config, resume=args.resume, overwrite=args.overwrite, command=command,
                           log=lambda line: print(line, flush=True))
            ctrl_c.over()  # a late Ctrl-C cannot skip the summary and --export
        except (ValueError, DatasetError, CommandError, OutputPathError, FolderBusyError) as err:
            return report_error(err)
        except TrainingInterrupted as stop:
            print(stop, file=sys.stderr)
            return 130
        return _finish(args, result)


def _config(args: argparse.Namespace) -> TrainConfig:
    """The TrainConfig the parsed options give; ValueError names a bad value."""
    return TrainConfig(
        data_dir=str(args.data), spec_path=str(args.spec), out_dir=str(args.out), model=args.model,
        width=args.width, decoder_channels=tuple(args.decoder_channels or ()),
        context_dilations=tuple(args.context_dilations or ()), epochs=args.epochs,
        batch_size=args.batch_size, crop=tuple(args.crop), lr=args.lr,
        precision=args.precision, checkpointing=args.checkpointing, seed=args.seed, device=args.device,
        val_every=args.val_every, limit_images=args.limit_images,
        train_splits=_splits(args.train_splits, args.holdout_sequence),
        val_split="" if args.val_split.lower() == "none" else args.val_split,
        holdout_sequence=args.holdout_sequence, scale_range=tuple(args.scale_range), jitter=args.jitter,
        exposure=tuple(args.exposure), colour_cast=args.colour_cast, copy_paste=args.copy_paste,
        class_weighting=args.class_weighting,
        weight_decay=args.weight_decay, ema_decay=args.ema, label_smoothing=args.label_smoothing,
        lovasz_weight=args.lovasz, ohem_fraction=args.ohem, finetune_full_epochs=args.finetune_full_epochs,
        full_crop=tuple(args.full_crop), init_from=str(args.init_from or ""),
    )


def _finish(args: argparse.Namespace, result: dict) -> int:
    """A complete run: say where its weights are and copy them to --export; exit code 0, or 2 when the copy fails
    (the message says how to export by hand)."""
    from ..train.loop import export_best

    best = Path(result["best_path"])
    if result["best_miou"] >= 0:
        print(f"best val mIoU {result['best_miou']:.4f}: {best}")
    else:
        print(f"no validation frames; final weights: {best}")
    if args.export is None:
        return 0
    if args.export.exists():  # it appeared while the run trained
        return report_error(CommandError(f"--export {args.export} appeared while the run trained and an export "
                                         f"never replaces a file; the run in {args.out} is complete: copy {best} "
                                         "to a new name to export it"))
    try:
        print(f"exported to {export_best(args.out, args.export)}")
    except OSError as err:  # OutputPathError names --export and why
        problem = str(err) if isinstance(err, OutputPathError) else f"cannot read {best}: {err.strerror or err}"
        return report_error(CommandError(f"{problem}; the run in {args.out} is complete, but not exported: "
                                         f"copy {best} to {args.export} to export it"))
    return 0


def _check_outputs(out: Path, export: Path | None) -> None:
    """OutputPathError, before any work, when --out cannot hold a run or --export cannot be
    written (a folder, or a place where nothing can be created): not hours later. Creates nothing."""
    check_output_folder(out, "--out")
    if export is not None:
        check_output_file(export, f"--export {export}:",
                          f"--export {export} is a folder; give a file name such as {export / 'model.safetensors'}")
        if export.suffix.lower() != ".safetensors":
            raise OutputPathError(f"--export {export}: the export is a leanseg .safetensors checkpoint; give a "
                                  f"name ending in .safetensors, such as {export.with_suffix('.safetensors')}")
        if export.exists():  # a model, the data, the spec, the run's own last.pt
            raise OutputPathError(f"--export {export} already exists: an export never replaces a file; remove it "
                                  "or give a new name")
        if export.resolve().parent == out.resolve() and export.name in RUN_FILES:
            raise OutputPathError(f"--export {export} is one of the run's own files; give a name outside {out} "
                                  "or another name")


def _splits(given: str | None, holdout: str) -> tuple[str, ...]:
    if given is None:
        return ("train", "val") if holdout else ("train",)
    return tuple(part.strip() for part in given.split(",") if part.strip())
