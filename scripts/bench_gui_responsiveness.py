"""How long the app's GUI thread waits while a large image segments on the worker.

    QT_QPA_PLATFORM=offscreen .venv/bin/python scripts/bench_gui_responsiveness.py [--model M] [--size 2048]
        [--rounds 3] [--json out/bench_gui_responsiveness.json]

The real main window (offscreen, settings in a temporary INI file) opens the model, shows a --size square
image, then segments it --rounds times while a 10 ms timer runs on the GUI thread. Each round reports the
ticks it saw, the median and the largest gap between ticks, and the job's own time: a gap near 10 ms is a
thread that never waited, a gap as long as the job is a thread the job blocked. The target: the
largest gap <= 100 ms. The load average is printed: on a busy machine the gaps stretch.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import cv2  # noqa: E402
import numpy as np  # noqa: E402
from PySide6.QtCore import QEventLoop, QTimer, SignalInstance  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from leanseg.core.assets import default_model_path  # noqa: E402
from leanseg.core.benchmarks.report import format_table, verdict, write_json  # noqa: E402
from leanseg.gui.main_window.settings import AppSettings  # noqa: E402
from leanseg.gui.main_window.window import MainWindow  # noqa: E402

TICK_MS = 10
TARGET_MS = 100
WAIT_MS = 600_000


def wait_for(signal: SignalInstance, start: Any = None) -> None:
    """Run the event loop until `signal` fires (calling `start` first); a job that never ends is an error."""
    loop = QEventLoop()
    signal.connect(loop.quit)
    guard = QTimer(singleShot=True, interval=WAIT_MS)
    guard.timeout.connect(lambda: loop.exit(1))
    guard.start()
    if start is not None:
        start()
    code = loop.exec()
    signal.disconnect(loop.quit)
    if code:
        raise SystemExit(f"no {signal} within {WAIT_MS // 1000} s")


def square_image(path: Path, size: int) -> Path:
    """A street-like test image: smooth gradients and noise, so the labels vary across it."""
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:size, 0:size]
    rgb = np.stack([x * 255 // (size - 1), y * 255 // (size - 1), (x + y) % 256], -1)
    rgb = (rgb + rng.integers(0, 40, rgb.shape)).clip(0, 255).astype(np.uint8)
    cv2.imwrite(str(path), rgb)
    return path


def one_round(window: MainWindow) -> dict[str, Any]:
    """Segment the shown image again with the GUI timer running; the gaps between its ticks."""
    ticks: list[float] = []
    timer = QTimer(interval=TICK_MS)
    timer.timeout.connect(lambda: ticks.append(time.perf_counter()))
    began = time.perf_counter()
    wait_for(window.segmented, lambda: (timer.start(), window.segment_current()))
    job_s = time.perf_counter() - began
    timer.stop()
    gaps = [1000 * (b - a) for a, b in zip(ticks, ticks[1:])]
    return {"ticks": len(ticks), "job s": round(job_s, 2),
            "median gap ms": round(statistics.median(gaps), 1) if gaps else None,
            "max gap ms": round(max(gaps), 1) if gaps else None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, default=None, help="default: the shipped model")
    parser.add_argument("--size", type=int, default=2048)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, default=Path("out/bench_gui_responsiveness.json"))
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.size < 32:
        parser.error(f"--rounds must be >= 1 and --size >= 32 (got {args.rounds}, {args.size})")
    model = args.model or default_model_path()
    app = QApplication.instance() or QApplication(sys.argv[:1])
    with tempfile.TemporaryDirectory() as scratch:
        window = MainWindow(settings=AppSettings(Path(scratch) / "settings.ini"), model_path=None)
        window.resize(1400, 900)
        window.show()
        wait_for(window.model_changed, lambda: window.open_model(model))
        image = square_image(Path(scratch) / f"square{args.size}.png", args.size)
        wait_for(window.segmented, lambda: window.open_image(image))  # untimed: the first job warms up
        rows = [{"round": i + 1, **one_round(window)} for i in range(args.rounds)]
        window.close()
    app.processEvents()
    gaps = [row["max gap ms"] for row in rows if row["max gap ms"] is not None]
    if not gaps:
        raise SystemExit("every job ended before the timer ticked twice: use a larger --size")
    worst = max(gaps)
    print(f"{model.name}, {args.size}x{args.size}, {TICK_MS} ms timer on the GUI thread; "
          f"load average {os.getloadavg()[0]:.2f}")
    print(format_table(rows, ["round", "ticks", "job s", "median gap ms", "max gap ms"]))
    print(f"largest gap {worst:.1f} ms (target <= {TARGET_MS} ms: {verdict(worst <= TARGET_MS)})")
    path = write_json(args.json, {"model": str(model), "size": args.size, "tick_ms": TICK_MS,
                                  "load_average": os.getloadavg()[0], "rounds": rows, "max_gap_ms": worst})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
