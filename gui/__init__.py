"""leanseg desktop app (PySide6 + pyqtgraph)."""
import os
import sys

if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # no screen: render off-screen instead of aborting

from . import qt_compat  # noqa: E402,F401  (before anything emits a signal: see qt_compat)
