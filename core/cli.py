"""`leanseg` command line: each sub-command lives in its own module in `commands/`."""
from __future__ import annotations

import argparse
import importlib
import os
import sys

from . import __version__, commands
from .commands import SUMMARIES, module_name


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """Every sub-command's parser; with `only`, that command's alone in full and the others as their names
    and one-line help (enough for the listing and for argparse's choices, without importing their modules)."""
    parser = argparse.ArgumentParser(prog="leanseg", description="Memory-lean U-Net segmentation.")
    parser.add_argument("--version", action="version", version=f"leanseg {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command, summary in SUMMARIES.items():
        if only is None or command == only:
            importlib.import_module(f"{commands.__name__}.{module_name(command)}").register(sub)
        else:
            sub.add_parser(command, help=summary)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one sub-command; the exit code says whether everything succeeded."""
    words = sys.argv[1:] if argv is None else argv
    if words and words[0] == "gui":  # every word after it, --help included, is the app's: argparse would take them
        from .commands.gui import start_app

        return start_app(words[1:])
    parser = build_parser(only=words[0] if words else "")  # "" or a word that names no command: none in full
    if not words:  # a bare `leanseg`: a usage error (exit 2, as argparse gives), shown with what it can do
        parser.print_help(sys.stderr)
        print("leanseg: error: name a COMMAND (leanseg COMMAND --help: its options)", file=sys.stderr)
        return 2
    args = parser.parse_args(words)
    try:
        return int(args.run(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except PermissionError as err:  # a path the user gave lies in a folder they cannot enter: no traceback
        print(f"leanseg: error: {err.filename}: {err.strerror or 'permission denied'} (check the file's permissions "
              "and those of the folders above it)" if err.filename else f"leanseg: error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `leanseg models | head -1`: the reader left; stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # else the exit's flush raises again
        return 141  # 128 + SIGPIPE, what a shell reports for a tool killed by it


if __name__ == "__main__":
    sys.exit(main())
