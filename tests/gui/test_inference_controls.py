"""The inference panel's averaging choices: the Multi-scale averaging box maps to InferenceOptions.scales and back,
and never combines with exact tiling into options core refuses, and its box shows when unticked; what the last run
came to fits the panel."""
from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QCheckBox, QStyle, QStyleOptionButton

from leanseg.core.engine.multiscale import SUGGESTED_SCALES
from leanseg.core.predict import InferenceOptions
from leanseg.gui.viewer.controls import InferenceControls
from leanseg.gui.viewer.last_run import LAST_RUN_LINES

from .conftest import LONG_RUN


def _controls(qtbot) -> InferenceControls:  # type: ignore[no-untyped-def]
    controls = InferenceControls()
    qtbot.addWidget(controls)
    return controls


def test_the_multiscale_box_maps_to_scales_and_back_without_echoes(qtbot):
    controls = _controls(qtbot)
    assert not controls.multiscale.isChecked() and controls.options().scales == (1.0,)  # off by default
    assert "0.75x, 1x and 1.25x" in controls.multiscale.toolTip()
    with qtbot.waitSignal(controls.options_changed, timeout=1000) as blocker:
        controls.multiscale.setChecked(True)
    assert blocker.args[0].scales == SUGGESTED_SCALES == (0.75, 1.0, 1.25)
    assert controls.options().scales == SUGGESTED_SCALES

    emitted: list[InferenceOptions] = []
    controls.options_changed.connect(emitted.append)
    controls.set_options(replace(controls.options(), scales=(1.0,)))
    assert not controls.multiscale.isChecked() and controls.options().scales == (1.0,)
    controls.set_options(replace(controls.options(), scales=(0.5, 1.0)))  # other scales are kept, not rounded
    assert controls.multiscale.isChecked() and controls.options().scales == (0.5, 1.0)
    assert "0.5x and 1x" in controls.multiscale.toolTip()
    assert emitted == []  # set_options shows options; it does not send them back


def _frame_contrast(box: QCheckBox) -> int:
    """The most a pixel of `box`'s indicator frame (its outer two pixels) differs from the window behind it, in
    any of red, green and blue."""
    option = QStyleOptionButton()
    box.initStyleOption(option)
    rect = box.style().subElementRect(QStyle.SubElement.SE_CheckBoxIndicator, option, box)
    image = box.grab().toImage()
    behind = box.palette().color(QPalette.ColorRole.Window)
    ring = [(x, y) for x in range(rect.left(), rect.right() + 1) for y in range(rect.top(), rect.bottom() + 1)
            if min(x - rect.left(), rect.right() - x, y - rect.top(), rect.bottom() - y) < 2]

    def difference(colour: QColor) -> int:
        return max(abs(colour.red() - behind.red()), abs(colour.green() - behind.green()),
                   abs(colour.blue() - behind.blue()))

    return max(difference(image.pixelColor(x, y)) for x, y in ring)


def test_an_unticked_box_shows_its_frame_on_the_dark_window(qtbot, app_style):
    controls = _controls(qtbot)
    controls.show()
    qtbot.waitExposed(controls)
    multiscale = controls.multiscale
    assert not multiscale.isChecked()
    assert _frame_contrast(multiscale) >= 60  # Fusion's own frame is a shade darker than the window: about 10
    multiscale.setChecked(True)
    assert _frame_contrast(multiscale) >= 60
    sub_folders = QCheckBox("Include sub-folders")  # as the batch dialog's boxes
    qtbot.addWidget(sub_folders)
    sub_folders.show()
    qtbot.waitExposed(sub_folders)
    assert _frame_contrast(sub_folders) >= 60
    sub_folders.setEnabled(False)
    assert 10 < _frame_contrast(sub_folders) < 60  # greyed, but still a box


def test_multiscale_and_exact_tiling_never_make_options_core_refuses(qtbot):
    controls = _controls(qtbot)
    exact = controls.tiling.findData("exact")
    controls.tiling.setCurrentIndex(exact)
    with qtbot.waitSignal(controls.options_changed, timeout=1000) as blocker:
        controls.multiscale.setChecked(True)  # exact tiles cannot be multi-scale: Tiling becomes auto
    assert (blocker.args[0].tiling, blocker.args[0].scales) == ("auto", SUGGESTED_SCALES)
    assert controls.tiling.currentData() == "auto"
    assert not controls.tiling.model().item(exact).isEnabled()
    assert "Multi-scale" in controls.tiling.itemData(exact, Qt.ItemDataRole.ToolTipRole)
    assert "exact" in controls.tiling.toolTip()

    controls.tiling.setCurrentIndex(exact)  # chosen by code, past the greyed-out entry
    assert (controls.options().tiling, controls.options().scales) == ("auto", SUGGESTED_SCALES)

    controls.multiscale.setChecked(False)  # exact is offered again
    assert controls.tiling.model().item(exact).isEnabled() and controls.tiling.toolTip() == ""
    controls.tiling.setCurrentIndex(exact)
    assert (controls.options().tiling, controls.options().scales) == ("exact", (1.0,))
    controls.set_options(replace(controls.options(), tiling="auto", scales=SUGGESTED_SCALES))
    assert not controls.tiling.model().item(exact).isEnabled()  # shown options grey it out too



def test_a_long_last_run_takes_a_few_lines_cut_at_a_word_and_is_whole_in_its_tooltip(qtbot):
    controls = _controls(qtbot)
    controls.resize(250, 500)
    controls.show()
    qtbot.waitExposed(controls)
    label = controls.last_result
    controls.show_last_run(LONG_RUN, tooltip="RSS: the resident set size")
    lines = label.text().split("\n")
    assert len(lines) == LAST_RUN_LINES and lines[-1].endswith("…")
    assert LONG_RUN.replace("\n", " ").startswith(" ".join(lines).removesuffix("…"))  # cut between two words
    assert LONG_RUN.replace("\n", " ")[len(" ".join(lines).removesuffix("…"))] in " ,"
    width = label.contentsRect().width()
    assert all(label.fontMetrics().horizontalAdvance(line) <= width for line in lines)
    assert label.toolTip() == LONG_RUN + "\n\nRSS: the resident set size"
    controls.show_last_run("Last run: 0.26 s · 12 MB · cpu", tooltip="RSS")
    assert label.text() == "Last run: 0.26 s · 12 MB · cpu" and label.toolTip() == "RSS"  # short: whole


def test_a_failure_is_shown_whole_however_long(qtbot):
    controls = _controls(qtbot)
    controls.resize(250, 500)
    controls.show()
    reason = "Last run failed: " + "the memory budget cannot hold the image; raise Memory budget. " * 4
    controls.show_last_run(reason, failed=True, tooltip=reason)
    assert controls.last_result.text() == reason  # it says what to change: never cut
