"""While a 2048x2048 image segments on the worker, the GUI thread keeps running a 10 ms timer on time."""
from __future__ import annotations

import time

from PySide6.QtCore import QTimer

from .conftest import JOB_TIMEOUT_MS, write_image

TICK_MS = 10
MAX_GAP_MS = 100  # the bar


def test_gui_timer_never_waits_more_than_100_ms_while_a_2048_image_segments(qtbot, make_window,
                                                                          gui_tiny_checkpoint, tmp_path):
    window = make_window(gui_tiny_checkpoint)
    image = write_image(tmp_path / "large.png", 2048, 2048)
    with qtbot.waitSignal(window.image_shown, timeout=JOB_TIMEOUT_MS):
        window.open_image(image)
    ticks: list[float] = []
    timer = QTimer()
    timer.setInterval(TICK_MS)
    timer.timeout.connect(lambda: ticks.append(time.perf_counter()))
    with qtbot.waitSignal(window.segmented, timeout=JOB_TIMEOUT_MS):
        timer.start()  # the job runs from here on: the image is shown, inference is on the worker
    timer.stop()
    gaps_ms = [1000 * (b - a) for a, b in zip(ticks, ticks[1:])]
    assert len(ticks) > 20, f"the job ended too fast to measure ({len(ticks)} ticks)"
    print(f"\n{len(ticks)} ticks over {ticks[-1] - ticks[0]:.2f} s while segmenting 2048x2048: "
          f"max gap {max(gaps_ms):.1f} ms, median {sorted(gaps_ms)[len(gaps_ms) // 2]:.1f} ms")
    assert max(gaps_ms) <= MAX_GAP_MS
