"""`leanseg gui [PATH] [options]`: start the desktop app (the `leanseg-gui` program).

core never imports the GUI: this finds the `leanseg-gui` console script's entry point and runs it in a
child process with the same Python, passing every argument through, --help included (the app's own
help lists its options).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from importlib.metadata import entry_points

from . import SUMMARIES
from .common import CommandError, report_error

GUI_SCRIPT = "leanseg-gui"
PROG = "leanseg gui"  # the app's usage and --help name the command the user typed


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("gui", help=SUMMARIES["gui"],
                            add_help=False)  # --help goes to the app, whose parser knows its options
    parser.add_argument("gui_args", nargs=argparse.REMAINDER, metavar="...")
    parser.set_defaults(run=run)


def gui_command(args: list[str]) -> list[str]:
    """The command line that starts the app: `python -c 'from MODULE import FUNC; ...' ARGS`."""
    found = entry_points(group="console_scripts", name=GUI_SCRIPT)
    entry = next(iter(found), None)
    if entry is None:
        raise CommandError(
            f"the desktop app is not installed (no {GUI_SCRIPT!r} entry point); install leanseg with its GUI "
            "dependencies: pip install -e . (PySide6, pyqtgraph)"
        )
    module, _, func = entry.value.partition(":")
    code = f"import sys; from {module} import {func} as main; sys.argv[0] = {PROG!r}; sys.exit(main())"
    return [sys.executable, "-c", code, *args]


def run(args: argparse.Namespace) -> int:
    return start_app(list(args.gui_args))


def start_app(arguments: list[str]) -> int:
    """Run the app with `arguments`, all of them its own; leanseg.core.cli hands `leanseg gui ...` here whole."""
    try:
        command = gui_command(arguments)
    except CommandError as err:
        return report_error(err)
    try:
        return subprocess.call(command)
    except KeyboardInterrupt:
        return 130
