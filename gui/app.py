"""`leanseg-gui [IMAGE|FOLDER|VIDEO] [--model M] [--screenshot PNG]`: the desktop app's entry point."""
from __future__ import annotations

import argparse
import os
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

SCREENSHOT_TIMEOUT_S = 600.0  # give up on --screenshot if the job has not ended by then


def leanseg_version() -> str:
    """The installed distribution's version ('unknown' when run from a source tree that is not installed)."""
    try:
        return version("leanseg")
    except PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    # `leanseg-gui`, or `leanseg gui` when started by that command (it names argv[0] so)
    prog = Path(sys.argv[0]).name if sys.argv and not sys.argv[0].endswith(".py") else "leanseg-gui"
    parser = argparse.ArgumentParser(prog=prog, description="leanseg desktop app.")
    parser.add_argument("--version", action="version", version=f"leanseg-gui {leanseg_version()}")
    parser.add_argument("path", nargs="?", type=Path, metavar="IMAGE|FOLDER|VIDEO", help="open this at start")
    parser.add_argument("--model", metavar="MODEL",
                        help="model file (.safetensors, .pt2, .onnx, .leanseg) or an installed model's name "
                             "(`leanseg models`); default: the last one used, else the shipped CamVid model")
    parser.add_argument("--screenshot", type=Path, metavar="PNG",
                        help="segment the IMAGE|FOLDER|VIDEO, save a screenshot to PNG and exit: of the window "
                             "once an image is segmented, of the batch dialog once a folder's first results are "
                             "listed, of the video panel once a video's first segmented frame is shown")
    parser.add_argument("--size", default="1440x900", metavar="WxH", help="window size for --screenshot")
    parser.add_argument("--settings", type=Path, metavar="INI",
                        help="keep settings in this INI file instead of the user's settings")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Open the window (and, with --screenshot, segment, save the picture and exit); returns the exit code."""
    args = build_parser().parse_args(argv)
    if args.screenshot is not None:
        if args.path is None:
            print("leanseg-gui: error: --screenshot needs an IMAGE, FOLDER or VIDEO to segment", file=sys.stderr)
            return 2
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # no screen needed to take the picture
    if args.path is not None and not args.path.exists():
        print(f"leanseg-gui: error: {args.path}: no such file or folder", file=sys.stderr)
        return 2

    from PySide6.QtWidgets import QApplication

    from .main_window.file_actions import path_kind
    from .main_window.screenshot import ScreenshotTaker
    from .main_window.settings import AppSettings
    from .main_window.window import MainWindow
    from .style import apply_style

    app = QApplication.instance() or QApplication([sys.argv[0]])
    app.setApplicationName("leanseg")
    app.setOrganizationName("leanseg")
    apply_style(app)  # type: ignore[arg-type]
    settings = AppSettings(args.settings)
    from leanseg.core.model.model_names import ModelNameError, find_model  # after parsing: --help needs no torch

    model = None
    if args.model:
        try:
            model = find_model(args.model)  # a path, or an installed model's file or card name (`leanseg models`)
        except ModelNameError as err:  # the window says the file cannot be opened, and keeps the default
            print(f"leanseg: {err}", file=sys.stderr)
            model = Path(args.model)
    window = MainWindow(settings=settings, model_path=model)
    taker = None
    if args.screenshot is not None:
        width, height = (int(v) for v in args.size.lower().split("x"))
        window.resize(width, height)
        taker = ScreenshotTaker(window, args.screenshot, SCREENSHOT_TIMEOUT_S)
    window.show()
    if args.path is not None:
        window.open_path(args.path)
        if taker is not None:
            taker.follow(path_kind(args.path))
    code = app.exec()
    return taker.exit_code if taker is not None else int(code)


if __name__ == "__main__":
    sys.exit(main())
