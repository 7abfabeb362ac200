"""The app with model files of other formats: an .onnx exported in the test opens, segments, shows its overlay
and the card's class names; without a card the banner says what was assumed and the card editor saves
NAME.json and reopens the model; a bad model file is named in a message and the window carries on."""
from __future__ import annotations

import gc
import json
import shutil
import weakref
from pathlib import Path

import pytest

from leanseg.core.model.card import read_card
from leanseg.gui.main_window.file_actions import MODEL_FILTER, path_kind
from tests.core import graph_samples as samples

from .conftest import JOB_TIMEOUT_MS, write_image


@pytest.fixture(scope="module")
def onnx_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tiny.onnx (TinySegNet, 5 classes) with its card tiny.json beside it."""
    path = samples.export_onnx(samples.made(), tmp_path_factory.mktemp("onnx") / "tiny.onnx")
    samples.write_card(path)
    return path


def legend_names(window) -> list[str]:  # type: ignore[no-untyped-def]
    legend = window.overlay_panel.legend
    return [legend.item(i).text().split("  —  ")[0] for i in range(legend.count())]  # "name  —  12.5 %"


def test_an_onnx_model_segments_with_its_cards_class_names(qtbot, make_window, onnx_model, tmp_path):
    window = make_window(onnx_model)
    assert window.model_status.info.class_names == samples.CLASSES
    assert not window.banner.isVisible()  # a card was found: nothing assumed
    assert "5 classes" in window.status_labels["model"].text()
    with qtbot.waitSignal(window.segmented, timeout=JOB_TIMEOUT_MS):
        window.open_image(write_image(tmp_path / "street.png", 45, 70))
    assert window.viewer.overlay_shown and window.viewer.labels.shape == (45, 70)
    assert legend_names(window) == list(samples.CLASSES)


def test_the_cards_name_and_architecture_are_shown(qtbot, make_window, onnx_model, tmp_path):
    from leanseg.gui.main_window.about import about_text

    named = tmp_path / "v3.onnx"
    shutil.copy(onnx_model, named)
    samples.write_card(named, name="Street U-Net", architecture="TinySegNet, 5 classes")
    window = make_window(named)
    assert window.controls.model_name.text() == "Street U-Net (v3.onnx)"
    assert window.controls.model_name.toolTip() == f"{named}\nTinySegNet, 5 classes"
    assert window.status_labels["model"].text() == "Street U-Net (v3.onnx) · 5 classes"
    assert "TinySegNet, 5 classes" in about_text(window.model_status)


def test_the_open_dialog_and_drops_take_every_model_format(onnx_model, tmp_path) -> None:
    for suffix in (".safetensors", ".pt2", ".onnx", ".leanseg"):
        assert f"*{suffix}" in MODEL_FILTER.split(";;")[0]
        assert path_kind(Path(f"net{suffix}")) == "model"
    renamed = tmp_path / "net.bin"  # a model under another name opens by its content, as in the CLI
    shutil.copy(onnx_model, renamed)
    assert path_kind(renamed) == "model"
    notes = tmp_path / "notes.txt"
    for text in ("not a model", "Results of run 3", "\n\tindented", "BM...", '"quoted"'):
        notes.write_text(text)  # the ONNX sniff's first byte matches all but the first: the parse decides
        assert path_kind(notes) == "image", text  # tried as an image, which names the problem


def test_without_a_card_the_banner_says_what_was_assumed_and_the_editor_saves_one(qtbot, make_window, onnx_model,
                                                                                 tmp_path):
    bare = tmp_path / "bare.onnx"
    shutil.copy(onnx_model, bare)
    window = make_window(bare)
    assert window.banner.isVisible() and window.banner.edit_card.isVisible()
    text = window.banner.text.text()
    assert "No card beside bare.onnx" in text and "ImageNet mean/std" in text
    assert window.model_status.info.class_names[0] == "class 0"
    editor = window.edit_card()
    assert editor is not None and editor.table.rowCount() == 5
    rows = range(editor.table.rowCount())  # numbered as the classes are, from 0
    assert [editor.table.verticalHeaderItem(row).text() for row in rows] == ["0", "1", "2", "3", "4"]
    assert [editor.table.item(row, 0).text() for row in rows] == [f"class {row}" for row in rows]
    editor.set_name(0, "sky")
    editor.set_colour(0, (10, 20, 30))
    editor.mean.setText("0.3, 0.4, 0.5")
    with qtbot.waitSignal(window.model_changed, timeout=JOB_TIMEOUT_MS):
        editor.save()
    card = read_card(tmp_path / "bare.json")
    assert card.classes[0] == "sky" and card.colours[0] == (10, 20, 30) and card.mean == (0.3, 0.4, 0.5)
    info = window.model_status.info
    assert info.class_names[0] == "sky" and info.class_colours[0] == (10, 20, 30) and info.mean == (0.3, 0.4, 0.5)
    assert not window.banner.isVisible()  # the card is there now
    assert legend_names(window)[0] == "sky"


def test_in_a_narrow_window_the_banners_text_keeps_the_width_and_its_buttons_go_below(qtbot, app_style, make_window,
                                                                                      onnx_model, tmp_path):
    bare = tmp_path / "plain.onnx"
    shutil.copy(onnx_model, bare)
    window = make_window(bare)
    banner, text = window.banner, window.banner.text
    assert banner.isVisible() and "No card beside plain.onnx" in text.text()
    line = text.fontMetrics().lineSpacing()

    def lines() -> float:
        return text.contentsRect().height() / line

    window.resize(900, 600)  # the viewer between the docks is some 370 px wide
    qtbot.waitUntil(lambda: banner.width() < 450)
    qtbot.waitUntil(lambda: text.width() >= banner.contentsRect().width() - 30)  # all of it, not a thin column
    assert lines() <= 4  # it was 8 lines of some 130 px beside the buttons
    assert banner.buttons.geometry().top() >= text.geometry().bottom()  # the buttons below the text
    assert banner.edit_card.isVisible() and banner.edit_card.visibleRegion().boundingRect().width() == \
        banner.edit_card.width()
    window.resize(1440, 900)
    qtbot.waitUntil(lambda: banner.buttons.geometry().top() < text.geometry().bottom())  # beside it again
    assert lines() <= 2 and text.width() + banner.buttons.width() <= banner.contentsRect().width()


def test_the_card_editor_refuses_a_bad_value_in_the_dialog(qtbot, make_window, onnx_model, tmp_path):
    bare = tmp_path / "bare.onnx"
    shutil.copy(onnx_model, bare)
    window = make_window(bare)
    editor = window.edit_card()
    editor.std.setText("0.2, 0, 0.3")
    editor.save()
    assert "Not saved" in editor.problem.text() and "std" in editor.problem.text()
    assert not (tmp_path / "bare.json").exists() and editor.isVisible()
    editor.std.setText("0.2, 0.2, 0.3")
    editor.table.item(2, 1).setText("12, 40")
    editor.save()  # the bad colour is named by its class index, as the table numbers it
    assert editor.problem.text() == "Not saved: class 2: a colour is three numbers r, g, b"


@pytest.mark.parametrize("kind", ["truncated", "card_contradicts"])
def test_a_bad_model_file_is_named_in_a_message_and_the_window_carries_on(qtbot, make_window, onnx_model,
                                                                          tmp_path, kind):
    window = make_window(onnx_model)
    bad = tmp_path / "bad.onnx"
    if kind == "truncated":
        bad.write_bytes(onnx_model.read_bytes()[:3000])
    else:
        shutil.copy(onnx_model, bad)
        (tmp_path / "bad.json").write_text(json.dumps({"card_version": 1, "classes": ["a", "b"]}))
    with qtbot.waitSignal(window.error_shown, timeout=JOB_TIMEOUT_MS) as shown:
        window.open_model(bad)
    message = shown.args[0]
    assert str(bad) in message and "\n" not in message
    assert ("not a readable ONNX model" if kind == "truncated" else "lists 2 classes, the graph outputs 5") in message
    assert window.model_status.path == onnx_model  # the previous model stays
    with qtbot.waitSignal(window.segmented, timeout=JOB_TIMEOUT_MS):
        window.open_image(write_image(tmp_path / "after.png", 40, 50))
    assert window.viewer.labels.shape == (40, 50)


def test_installed_models_open_from_the_file_menu(qtbot, make_window, onnx_model, tmp_path, monkeypatch):
    installed = tmp_path / "installed"
    installed.mkdir()
    shutil.copy(onnx_model, installed / "roads.onnx")
    samples.write_card(installed / "roads.onnx", name="Road net")
    (installed / "broken.onnx").write_bytes(b"")
    monkeypatch.setenv("LEANSEG_MODELS_DIR", str(installed))
    window = make_window()
    menu = window.menu_actions.models_menu
    menu.aboutToShow.emit()
    actions = {action.text(): action for action in menu.actions() if action.text()}
    assert actions["broken.onnx"].isEnabled() is False  # listed with its problem in the tooltip
    assert "cannot be opened" in actions["broken.onnx"].toolTip()
    assert actions[f"User folder: {installed}"].isEnabled() is False
    with qtbot.waitSignal(window.model_changed, timeout=JOB_TIMEOUT_MS):
        actions["Road net (roads.onnx)"].trigger()
    assert window.model_status.path == installed / "roads.onnx"
    assert window.model_status.info.class_names == samples.CLASSES


def test_the_status_bar_gives_the_reason_first_and_the_files_by_name(qtbot, make_window, onnx_model, tmp_path):
    window = make_window(onnx_model)
    folder = tmp_path / "a folder with a long name that would fill the status bar on its own"
    folder.mkdir()
    bad = folder / "mismatch.onnx"
    shutil.copy(onnx_model, bad)
    (folder / "mismatch.json").write_text(json.dumps({"card_version": 1, "classes": ["a", "b"]}))
    with qtbot.waitSignal(window.error_shown, timeout=JOB_TIMEOUT_MS) as shown:
        window.open_model(bad)
    line = window.statusBar().currentMessage()
    assert line.startswith("The card mismatch.json lists 2 classes, the graph outputs 5")
    assert line.endswith("· could not open the model mismatch.onnx") and str(folder) not in line
    assert window.statusBar().toolTip() == shown.args[0] == window.error_box.text()  # the whole text stays
    assert str(bad) in window.error_box.text()
    window.statusBar().showMessage("something else")
    assert window.statusBar().toolTip() == ""  # the tooltip went with the error's line


def test_a_replaced_model_is_collected_not_kept_for_the_life_of_the_app(qtbot, make_window, onnx_model):
    window = make_window(onnx_model)
    first = weakref.ref(window.controller.worker._loaded.model.net)  # the imported graph: its nodes form cycles
    for _ in range(2):  # the same file again: a new model each time, as after the card editor saves its card
        with qtbot.waitSignal(window.model_changed, timeout=JOB_TIMEOUT_MS):
            window.open_model(onnx_model)
    gc.collect()  # an object the app froze (it freezes what is alive after each load) would survive this
    assert first() is None
