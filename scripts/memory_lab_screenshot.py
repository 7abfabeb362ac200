"""Screenshot of the Memory lab for the README, from a real run's JSON (written by `leanseg profile`
or the lab's Export JSON): shows the run, hovers the eager peak step, grabs the window.

    QT_QPA_PLATFORM=offscreen .venv/bin/python scripts/memory_lab_screenshot.py out/profile/memory_lab.json \
        docs/memory_lab.png
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtWidgets import QApplication  # noqa: E402

from leanseg.gui.memory_lab.window import MemoryLabWindow  # noqa: E402
from leanseg.gui.style import apply_style  # noqa: E402


def main(source: Path, target: Path) -> int:
    app = QApplication.instance() or QApplication(sys.argv[:1])
    apply_style(app)  # type: ignore[arg-type]
    lab = MemoryLabWindow()
    lab.resize(1500, 940)
    result = lab.open_json(source)
    lab.show()
    app.processEvents()
    if result.eager is not None:
        lab.hover_step(result.eager.peak_index)
        lab.step_chart.cursor.setPos(result.eager.peak_index)
    app.processEvents()
    written = lab.export_png(target)
    print(f"written {written}")
    lab.close()
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: memory_lab_screenshot.py RESULT.json OUT.png")
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
