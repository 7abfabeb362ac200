"""The Memory lab window: a real run on a tiny model (each configuration in its own subprocess), cancel, export;
before a run, charts that say what they will show instead of axes ranged over nothing."""
from __future__ import annotations

import json
from pathlib import Path

import cv2
import psutil
from PySide6.QtCore import QPointF, QRect
from PySide6.QtWidgets import QLabel
from pytestqt.qtbot import QtBot

from leanseg.core.events import JobEvent
from leanseg.core.profile import CONFIGURATION_NAMES, ModelSpec
from leanseg.gui.memory_lab.window import MemoryLabWindow

from .conftest import tick_labels

LAB_TIMEOUT_MS = 240_000  # each configuration starts a fresh Python with torch; the test machine is busy
RUN = ("eval no_grad", "engine fp32")  # a subset keeps the test short (a fresh Python per run)


def _lab(qtbot: QtBot, checkpoint: Path, configurations: tuple[str, ...]) -> MemoryLabWindow:
    lab = MemoryLabWindow(ModelSpec(str(checkpoint)), "tiny")
    qtbot.addWidget(lab)
    lab.input_size.setValue(64)
    lab.repeats.setValue(1)
    for name, box in lab.config_boxes.items():
        box.setChecked(name in configurations)
    return lab


def test_lab_runs_and_draws_one_bar_per_configuration(qtbot: QtBot, gui_tiny_checkpoint: Path,
                                                      tmp_path: Path) -> None:
    lab = _lab(qtbot, gui_tiny_checkpoint, RUN)
    with qtbot.waitSignal(lab.finished, timeout=LAB_TIMEOUT_MS) as finished:
        lab.run_button.click()
        assert not lab.run_button.isEnabled() and lab.cancel_button.isEnabled()
    result = finished.args[0]
    assert [r["name"] for r in result.rows] == list(RUN)
    assert all("error" not in r and r["peak_bytes"] > 0 for r in result.rows), result.rows
    assert lab.peak_chart.bar_count() == len(RUN) == lab.time_chart.bar_count()
    assert lab.peak_chart.names == list(RUN)
    assert result.bounds is not None
    assert sorted(lab.peak_chart.line_values()) == sorted([result.bounds.pieces_bytes / 1e6,
                                                           result.bounds.whole_bytes / 1e6])
    assert lab.progress.value() == lab.progress.maximum() == len(RUN) + 1
    assert lab.run_button.isEnabled() and not lab.cancel_button.isEnabled()
    # the step plot shows the eager profile with its peak step labelled by layer
    eager = result.eager
    assert eager is not None and eager.peak_step is not None
    assert eager.peak_step.layer in lab.step_chart.peak_label.textItem.toPlainText()
    # hovering a step lists the tensors alive there
    lab.hover_step(3)
    assert lab.tensor_list.count() >= 1
    assert eager.steps[3].layer in lab.tensor_title.text()
    lab.profile_choice.setCurrentIndex(1)
    assert lab.step_chart.profile is result.engine
    # export
    png, data = lab.export_png(tmp_path / "lab.png"), lab.export_json(tmp_path / "lab.json")
    assert cv2.imread(str(png)).shape[0] > 100
    assert [r["name"] for r in json.loads(data.read_text())["rows"]] == list(RUN)


def test_cancel_stops_the_lab_and_its_subprocess(qtbot: QtBot, gui_tiny_checkpoint: Path) -> None:
    lab = _lab(qtbot, gui_tiny_checkpoint, CONFIGURATION_NAMES)
    lab.input_size.setValue(2048)
    with qtbot.waitSignal(lab.runner.job_event, timeout=30_000):
        lab.run_lab()
    qtbot.waitUntil(lambda: len(psutil.Process().children()) == 1, timeout=30_000)
    with qtbot.waitSignal(lab.cancelled, timeout=30_000):
        lab.cancel_button.click()
    assert psutil.Process().children() == []
    assert lab.peak_chart.bar_count() == 0 and lab.run_button.isEnabled()
    assert lab.summary.text() == "Cancelled."


def test_tools_menu_opens_the_lab_for_the_loaded_model(make_window, gui_tiny_checkpoint: Path) -> None:  # type: ignore[no-untyped-def]
    window = make_window(gui_tiny_checkpoint)
    window.memory_lab_action.trigger()
    lab = window.memory_lab
    assert lab.isVisible() and lab.spec == ModelSpec(str(gui_tiny_checkpoint))
    assert lab.model_label.text() == gui_tiny_checkpoint.name
    lab.close()


def test_at_1000_px_wide_the_lab_shows_its_controls_whole_and_cuts_a_long_model_path(  # type: ignore[no-untyped-def]
        qtbot: QtBot, app_style, gui_tiny_checkpoint: Path) -> None:
    lab = _lab(qtbot, gui_tiny_checkpoint, RUN)
    whole = ("default model /home/someone/projects/street scenes/segmentation experiments/2024 runs/"
             "camvid_mobileunet.safetensors")  # about 900 px: wider than a 1000 px window leaves it, not a 1600 px one
    lab.set_model(lab.spec, whole)
    assert lab.minimumSizeHint().width() <= 1024
    lab.resize(1000, 700)
    lab.show()
    qtbot.waitExposed(lab)
    assert (lab.width(), lab.height()) == (1000, 700)  # nothing holds it wider
    shown = QLabel.text(lab.model_label)
    assert "…" in shown and shown.endswith("camvid_mobileunet.safetensors")  # cut in the middle: the name stays
    assert lab.model_label.text() == lab.model_label.toolTip() == whole
    controls = [*lab.config_boxes.values(), lab.input_size, lab.repeats, lab.run_button, lab.cancel_button,
                lab.open_button, lab.export_png_button, lab.export_json_button]
    places = [QRect(control.mapTo(lab, control.rect().topLeft()), control.size()) for control in controls]
    for i, place in enumerate(places):
        assert lab.rect().contains(place), (controls[i], place)
        assert controls[i].width() >= controls[i].minimumSizeHint().width(), controls[i]  # not squeezed
        assert not any(place.intersects(other) for other in places[i + 1:]), controls[i]
    assert len({box.y() for box in lab.config_boxes.values()}) == 2  # the boxes wrapped to a second row

    lab.resize(1600, 700)
    qtbot.waitUntil(lambda: QLabel.text(lab.model_label) == whole)
    assert lab.model_label.toolTip() == ""
    assert len({box.y() for box in lab.config_boxes.values()}) == 1  # all in one row again


def test_bar_names_and_bound_labels_keep_clear_of_each_other(qtbot):
    """Names on the left, one per row and never clipped; bound names above the plot, never on the bars."""
    from PySide6.QtGui import QFontMetrics

    from leanseg.gui.memory_lab.charts import BarChart

    chart = BarChart("time per run (s)", "s")
    qtbot.addWidget(chart)
    chart.resize(420, 300)  # narrow, as the time chart is beside the peak chart
    chart.show()
    qtbot.waitExposed(chart)
    names = list(CONFIGURATION_NAMES)
    chart.set_bars(names, [float(10 * (i + 1)) for i in range(len(names))])
    chart.set_lines([(35.0, "lower bound, blocks whole 35 MB"), (12.0, "lower bound, in pieces 12 MB")])
    axis = chart.getAxis("left")
    view = chart.getViewBox()
    metrics = QFontMetrics(axis.font())
    widest = max(metrics.horizontalAdvance(n) for n in names)
    qtbot.waitUntil(lambda: axis.width() >= widest, timeout=5_000)  # names are not cut off (after layout)
    row_px = abs(view.mapViewToScene(QPointF(0, 1)).y() - view.mapViewToScene(QPointF(0, 0)).y())
    assert row_px >= metrics.height()  # one row per name: names cannot overlap
    title = chart.getPlotItem().titleLabel
    assert "blocks whole 35 MB" in title.text and "in pieces 12 MB" in title.text
    assert not title.sceneBoundingRect().intersects(view.sceneBoundingRect())
    assert all(getattr(line, "label", None) is None for line in chart._lines)  # nothing written on the plot


def _axis_texts(chart) -> list[str]:  # type: ignore[no-untyped-def]
    """The axis titles and every tick label the chart's left and bottom axes draw now."""
    texts = []
    for side in ("left", "bottom"):
        axis = chart.getAxis(side)
        texts.append(axis.labelString())
        texts += [text for text, _rect in tick_labels(axis)]
    return texts


def test_before_a_run_the_charts_say_what_they_will_show_on_clean_axes(qtbot: QtBot, gui_tiny_checkpoint: Path,
                                                                        monkeypatch) -> None:  # type: ignore[no-untyped-def]
    lab = _lab(qtbot, gui_tiny_checkpoint, RUN)
    lab.resize(1100, 720)
    lab.show()
    qtbot.waitExposed(lab)
    charts = (lab.peak_chart, lab.time_chart, lab.step_chart)
    for chart in charts:
        assert chart.is_empty() and chart.placeholder.isVisible()
        assert chart.placeholder.textItem.toPlainText().startswith("Run the lab to see ")
        texts = _axis_texts(chart)
        assert len(texts) == 2 and not any("(x" in text for text in texts), texts  # titles only: no ticks, no x0.001
        assert chart.getViewBox().viewRange() == [[0.0, 1.0], [0.0, 1.0]]
    assert "held (MB)" in lab.step_chart.getAxis("left").labelString()
    assert not lab.step_chart.legend.isVisible()  # no curves to name

    monkeypatch.setattr(lab.runner, "start", lambda request: None)  # the run's own test is above: just its start
    lab.run_lab()
    assert all(chart.is_empty() for chart in charts)
    assert lab.peak_chart.placeholder.textItem.toPlainText() == "Measuring the first configuration…"
    lab._on_event(JobEvent("info", index=0, message="eval no_grad", data={
        "row": {"name": "eval no_grad", "peak_bytes": 9_400_000, "seconds": 0.0206}}))
    assert not lab.peak_chart.is_empty() and not lab.peak_chart.placeholder.isVisible()
    assert lab.step_chart.is_empty()  # its profile comes at the end
    qtbot.waitUntil(lambda: "eval no_grad" in _axis_texts(lab.time_chart))  # once the axis is as wide as it
    assert not any("(x" in text for text in _axis_texts(lab.time_chart))  # 0.02 s: no "(x0.001)"
    lab._on_cancelled()
    assert lab.step_chart.placeholder.textItem.toPlainText().startswith("Run the lab to see ")
