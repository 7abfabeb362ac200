"""Options that `segment`, `batch` and `video` (and, for the device, `bench`, `profile`, `train`) share,
defined once so their names, defaults and help read the same everywhere.

Overlays are on by default on all three: an overlay is what a person looks at to judge a result,
`segment` and `video` always made them, and a folder run that only wants labels says `--no-overlay`.
"""
from __future__ import annotations

import argparse

from ..plotting import CHART_FORMATS

DEFAULT_ALPHA = 0.5  # opacity of the class colours over the image in overlays
DEVICE_HELP = "auto (CUDA if present, else CPU), cpu, cuda or cuda:N"


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Adds `(default: X)` to each option's help that does not say its default already, X as it would be typed
    (`on` for a --flag/--no-flag that is on, `256 320` for a pair); keeps the description's line breaks. Options
    without a value to show (None, False: a flag) are left as they are."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        no_value = action.default is None or action.default is False or action.default in ("", argparse.SUPPRESS)
        if not action.option_strings or no_value or "default" in text:
            return text
        default = action.default
        if default is True:
            shown = "on"
        elif isinstance(default, (tuple, list)):
            shown = " ".join(map(str, default))
        else:
            shown = str(default)
        return f"{text} (default: {shown.replace('%', '%%')})"


HELP_FORMATTER = HelpFormatter
SEGMENT_EXIT_CODES = "exit code: 0 every image is segmented, 1 some failed, 2 usage error, 130 stopped before the end"


def alpha_value(text: str) -> float:
    """argparse type for an opacity in 0..1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number; give an opacity from 0 to 1") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be from 0 (invisible) to 1 (opaque), got {value}")
    return value


def add_overlay_options(parser: argparse.ArgumentParser, what: str = "NAME_overlay.png") -> None:
    """`--overlay/--no-overlay` (default on) and `--alpha A`."""
    group = parser.add_argument_group("overlay")
    group.add_argument("--overlay", action=argparse.BooleanOptionalAction, default=True,
                       help=f"write {what}: the image with the class colours over it")
    group.add_argument("--alpha", type=alpha_value, default=DEFAULT_ALPHA, metavar="A",
                       help="overlay opacity of the class colours, 0..1")


def add_probs_option(parser: argparse.ArgumentParser) -> None:
    """`--probs`: also write NAME_probs.npy."""
    parser.add_argument("--probs", action="store_true",
                        help="also write NAME_probs.npy: class probabilities, (K, H, W) float16")


def add_device_option(parser: argparse.ArgumentParser | argparse._ArgumentGroup, default: str = "auto") -> None:
    """`--device`, default auto everywhere."""
    parser.add_argument("--device", default=default, help=DEVICE_HELP)


def add_chart_format_option(parser: argparse.ArgumentParser) -> None:
    """`--chart-format png|svg|pdf` for commands that write charts under fixed names."""
    parser.add_argument("--chart-format", choices=CHART_FORMATS, default="png", help="file type of the charts")
