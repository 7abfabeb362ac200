"""A run in many tiles shows its plan (grid, tile size, budget) as soon as the tiler chose it, before the first
tile, and how long the tiles left should take once a few have run; a cancel keeps the plan and says how far it got."""
from __future__ import annotations

import re
import threading
from dataclasses import replace

from PySide6.QtCore import Qt

from leanseg.gui.viewer.last_run import MIN_TILES_FOR_ESTIMATE, TileClock, time_left_text

from .conftest import JOB_TIMEOUT_MS, write_image

TIME_LEFT = re.compile(r"(a few seconds|about \d+ (s|min)( \d+ s)?) left")


class Gates:
    """Holds the worker (on its own thread) at the plan and at a given tile until the test lets it go on."""

    def __init__(self, at_tile: int) -> None:
        self.at_tile = at_tile  # 0-based index of the tile to hold at
        self.plan, self.tile = threading.Event(), threading.Event()

    def __call__(self, job_id: int, event) -> None:  # type: ignore[no-untyped-def]
        if event.kind == "plan":
            self.plan.wait(timeout=JOB_TIMEOUT_MS / 1000)
        elif event.kind == "tile" and event.index == self.at_tile:
            self.tile.wait(timeout=JOB_TIMEOUT_MS / 1000)

    def release(self) -> None:
        self.plan.set()
        self.tile.set()


def _tiled_window(qtbot, make_window, checkpoint):  # type: ignore[no-untyped-def]
    window = make_window(checkpoint)
    window.resize(1280, 800)
    tiled = replace(window.controls.options(), engine="eager", tiling="fast", memory_budget=33_000_000,
                    mirror="off")  # 2 x 4 tiles of a 512 x 512 image
    window.controls.set_options(tiled)
    with qtbot.waitSignal(window.model_changed, timeout=JOB_TIMEOUT_MS):
        window.controller.configure(None, tiled)
    return window


def test_the_plan_shows_before_the_first_tile_and_the_time_left_after_a_few(qtbot, make_window, gui_tiny_checkpoint,
                                                                            tmp_path):
    window = _tiled_window(qtbot, make_window, gui_tiny_checkpoint)
    controls = window.controls
    gates = Gates(at_tile=MIN_TILES_FOR_ESTIMATE)  # held once the estimate has its tiles
    window.controller.worker.job_event.connect(gates, Qt.ConnectionType.DirectConnection)
    try:
        window.open_image(write_image(tmp_path / "big.png", 512, 512))
        # the worker waits at its plan: no tile has run, and the panel already says what the run will do
        qtbot.waitUntil(lambda: controls.last_result.whole_text.startswith("This run:"), timeout=JOB_TIMEOUT_MS)
        assert controls.progress.format() == "tile 0 of 8" and controls.progress.maximum() == 8
        planned = controls.last_result.whole_text
        assert "tiling fast: 2 rows x 4 columns of tiles" in planned and "px" in planned
        assert "budget 33.0 MB" in planned and "estimating the time left" in planned
        assert "budget 33.0 MB" in controls.last_result.toolTip()  # the whole plan, where the panel cuts it
        assert window.statusBar().currentMessage() == "Segmenting big.png in 8 tiles…"
        gates.plan.set()
        qtbot.waitUntil(lambda: controls.progress.format() == f"tile {MIN_TILES_FOR_ESTIMATE + 1} of 8",
                        timeout=JOB_TIMEOUT_MS)
        first_line, plan_line = controls.last_result.whole_text.split("\n")
        assert TIME_LEFT.fullmatch(first_line.removeprefix("This run: ")), first_line
        assert plan_line.startswith("tiling fast: 2 rows x 4 columns of tiles")
        message = window.statusBar().currentMessage()
        assert message.startswith(f"Segmenting big.png: tile {MIN_TILES_FOR_ESTIMATE + 1} of 8, ")
        assert TIME_LEFT.search(message), message
        with qtbot.waitSignal(window.segmented, timeout=JOB_TIMEOUT_MS):
            gates.tile.set()
    finally:
        gates.release()
        window.controller.worker.job_event.disconnect(gates)
    assert controls.last_result.whole_text.startswith("Last run: ")  # the run's summary replaces its plan


def test_a_cancelled_tiled_run_keeps_its_plan_and_says_how_far_it_got(qtbot, make_window, gui_tiny_checkpoint,
                                                                      tmp_path):
    window = _tiled_window(qtbot, make_window, gui_tiny_checkpoint)
    gates = Gates(at_tile=1)
    gates.plan.set()
    window.controller.worker.job_event.connect(gates, Qt.ConnectionType.DirectConnection)
    try:
        window.open_image(write_image(tmp_path / "big.png", 512, 512))
        qtbot.waitUntil(lambda: window.controls.progress.format() == "tile 2 of 8", timeout=JOB_TIMEOUT_MS)
        with qtbot.waitSignal(window.job_ended, timeout=JOB_TIMEOUT_MS):
            window.cancel_job()
            gates.tile.set()
    finally:
        gates.release()
        window.controller.worker.job_event.disconnect(gates)
    stopped, plan = window.controls.last_result.whole_text.split("\n")
    assert stopped == "Cancelled after 2 of 8 tiles" and plan.startswith("tiling fast: 2 rows x 4 columns")


def test_the_time_left_counts_from_the_first_tile_and_starts_again_when_tiles_split():
    clock = TileClock("tiling exact: 9 rows x 15 columns of tiles 128x160 px", 135)
    assert clock.summary() == ("This run: estimating the time left…\n"
                               "tiling exact: 9 rows x 15 columns of tiles 128x160 px")
    clock.tile_done(1, 135, now=100.0)  # the first tile carries the warm-up: not counted
    clock.tile_done(2, 135, now=100.5)
    assert clock.seconds_left() is None
    clock.tile_done(3, 135, now=101.0)  # two tiles in 1 s: 132 more take 66 s
    assert clock.seconds_left() == 66.0 and clock.time_left() == "about 1 min 10 s left"
    clock.tile_done(4, 140, now=101.5)  # a tile split after running out of memory: a new rate from here
    assert clock.seconds_left() is None
    clock.tile_done(6, 140, now=102.5)
    assert clock.seconds_left() == 67.0


def test_the_time_left_is_rounded_as_far_as_an_estimate_deserves():
    assert [time_left_text(s) for s in (4, 12, 58, 61, 130, 3594, 7300)] == [
        "a few seconds left", "about 10 s left", "about 1 min left", "about 1 min left", "about 2 min 10 s left",
        "about 59 min 50 s left", "about 2 h 02 min left"]
