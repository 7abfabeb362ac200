"""`leanseg gui [PATH] [--model M] [--screenshot PNG]`: start the desktop app (the `leanseg-gui` program).

core never imports the GUI: this finds the `leanseg-gui` console script's entry point and runs it in a
child process with the same Python, passing the arguments through.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from importlib.metadata import entry_points

from .common import CommandError, report_error

GUI_SCRIPT = "leanseg-gui"


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("gui", help="open the desktop app", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("gui_args", nargs=argparse.REMAINDER, metavar="...",
                        help="passed to leanseg-gui: [IMAGE|FOLDER|VIDEO] [--model M] [--screenshot PNG]")
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
    code = f"import sys; from {module} import {func} as main; sys.argv[0] = {GUI_SCRIPT!r}; sys.exit(main())"
    return [sys.executable, "-c", code, *args]


def run(args: argparse.Namespace) -> int:
    try:
        command = gui_command(list(args.gui_args))
    except CommandError as err:
        return report_error(err)
    try:
        return subprocess.call(command)
    except KeyboardInterrupt:
        return 130
