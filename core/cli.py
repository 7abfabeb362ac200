"""`leanseg` command line: each sub-command lives in its own module in `commands/`."""
from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys

from . import __version__, commands
from .commands.gui import start_app


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="leanseg", description="Memory-lean U-Net segmentation.")
    parser.add_argument("--version", action="version", version=f"leanseg {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one sub-command; the exit code says whether everything succeeded."""
    parser = build_parser()
    words = sys.argv[1:] if argv is None else argv
    if not words:
        parser.print_help()  # a bare `leanseg`: what it can do, not a usage error
        return 0
    if words[0] == "gui":  # every word after it, --help included, is the app's: argparse would take options
        return start_app(words[1:])
    args = parser.parse_args(words)
    try:
        return int(args.run(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `leanseg models | head -1`: the reader left; stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # else the exit's flush raises again
        return 141  # 128 + SIGPIPE, what a shell reports for a tool killed by it


if __name__ == "__main__":
    sys.exit(main())
