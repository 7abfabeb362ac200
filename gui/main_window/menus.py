"""Menus and toolbar of the main window: actions are created here and connected to the window's methods."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QDockWidget, QMenu, QMenuBar, QStyle, QToolBar

from ..viewer.view import SegmentationViewer
from .settings import AppSettings


class MenuHost(Protocol):
    """What the menus call on the window they are built for (the main window provides all of it)."""

    viewer: SegmentationViewer
    docks: list[QDockWidget]
    settings: AppSettings

    def choose_image(self) -> None: ...
    def choose_folder(self) -> None: ...
    def choose_video(self) -> None: ...
    def choose_model(self) -> None: ...
    def open_model(self, path: Path) -> None: ...
    def save_labels(self) -> object: ...
    def save_overlay(self) -> object: ...
    def segment_current(self) -> None: ...
    def cancel_job(self) -> None: ...
    def show_about(self) -> None: ...
    def open_path(self, path: Path) -> None: ...
    def close(self) -> bool: ...
    def style(self) -> QStyle: ...
    def menuBar(self) -> QMenuBar: ...
    def addToolBar(self, toolbar: QToolBar) -> None: ...


@dataclass
class WindowActions:
    open_image: QAction
    open_folder: QAction
    open_video: QAction
    open_model: QAction
    save_labels: QAction
    save_overlay: QAction
    segment: QAction
    cancel: QAction
    show_overlay: QAction
    fit: QAction
    recent_menu: QMenu
    models_menu: QMenu
    help_menu: QMenu


def _action(window: MenuHost, text: str, slot, shortcut=None, icon=None, tip: str = "") -> QAction:  # type: ignore[no-untyped-def]
    assert isinstance(window, QObject), "the menus' host is the main window, which owns their actions"
    action = QAction(text, window)
    if shortcut is not None:
        action.setShortcut(QKeySequence(shortcut))
    if icon is not None:
        action.setIcon(window.style().standardIcon(icon))
    if tip:
        action.setStatusTip(tip)
        action.setToolTip(tip)
    action.triggered.connect(lambda _checked=False: slot())
    return action


def build_menus(window: MenuHost) -> WindowActions:
    """File, View and Help menus plus the toolbar; returns the actions the window enables and disables."""
    pix = QStyle.StandardPixmap
    open_image = _action(window, "&Open image…", window.choose_image, QKeySequence.StandardKey.Open,
                         pix.SP_DialogOpenButton, "Open an image and segment it")
    open_folder = _action(window, "Open &folder…", window.choose_folder, "Ctrl+Shift+O", pix.SP_DirOpenIcon,
                          "Segment every image in a folder")
    open_video = _action(window, "Open &video…", window.choose_video, "Ctrl+Shift+V", pix.SP_MediaSeekForward,
                         "Segment a video frame by frame")
    open_model = _action(window, "Open &model…", window.choose_model, "Ctrl+M", pix.SP_FileIcon,
                         "Use another model file (.safetensors, .pt2, .onnx, .leanseg)")
    save_labels = _action(window, "Save &labels…", window.save_labels, QKeySequence.StandardKey.Save,
                          pix.SP_DialogSaveButton, "Save the labels as a PNG of class indices")
    save_overlay = _action(window, "Save o&verlay…", window.save_overlay, "Ctrl+Shift+S", None,
                           "Save the image with the coloured overlay as a PNG")
    quit_action = _action(window, "&Quit", window.close, QKeySequence.StandardKey.Quit)
    segment = _action(window, "&Segment", window.segment_current, "F5", pix.SP_MediaPlay, "Segment the image")
    cancel = _action(window, "&Cancel", window.cancel_job, "Esc", pix.SP_MediaStop, "Stop at the next tile")
    show_overlay = _action(window, "Show &overlay", lambda: None, "O", None, "Show or hide the label overlay")
    show_overlay.setCheckable(True)
    show_overlay.setChecked(True)
    fit = _action(window, "&Fit image", window.viewer.fit, "F", None, "Fit the image in view")

    file_menu = window.menuBar().addMenu("&File")
    for action in (open_image, open_folder, open_video, open_model):
        file_menu.addAction(action)
    models_menu = file_menu.addMenu("&Installed models")
    models_menu.aboutToShow.connect(lambda: _fill_models(window, models_menu))
    recent_menu = file_menu.addMenu("Open &recent")
    recent_menu.aboutToShow.connect(lambda: _fill_recent(window, recent_menu))
    file_menu.addSeparator()
    file_menu.addAction(save_labels)
    file_menu.addAction(save_overlay)
    file_menu.addSeparator()
    file_menu.addAction(quit_action)

    view_menu = window.menuBar().addMenu("&View")
    view_menu.addAction(show_overlay)
    view_menu.addAction(fit)
    view_menu.addSeparator()
    for dock in window.docks:
        view_menu.addAction(dock.toggleViewAction())

    run_menu = window.menuBar().addMenu("&Run")
    run_menu.addAction(segment)
    run_menu.addAction(cancel)

    help_menu = window.menuBar().addMenu("&Help")
    help_menu.addAction(_action(window, "&About leanseg", window.show_about))

    toolbar = QToolBar("Main")
    toolbar.setObjectName("mainToolbar")
    toolbar.setMovable(False)
    toolbar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
    for tool in (open_image, open_folder, open_video, open_model, None, segment, cancel, None, fit, save_labels):
        if tool is None:
            toolbar.addSeparator()
        else:
            toolbar.addAction(tool)
    window.addToolBar(toolbar)
    return WindowActions(open_image, open_folder, open_video, open_model, save_labels, save_overlay, segment,
                         cancel, show_overlay, fit, recent_menu, models_menu, help_menu)


def _fill_models(window: MenuHost, menu: QMenu) -> None:
    """The shipped model and the user model folder's (`leanseg import-model` puts them there), as listed by
    `leanseg models`: name, format and classes from cards and metadata, nothing run."""
    from leanseg.core.model.catalog import display_name, installed_models, user_models_dir

    menu.clear()
    models = installed_models()
    for model in models:
        action = menu.addAction(display_name(model.path, model.name))
        action.setToolTip(f"{model.path}\n{model.summary()}")
        action.setEnabled(not model.problem)
        action.triggered.connect(lambda _checked=False, path=model.path: window.open_model(path))
    if not models:
        menu.addAction("(none)").setEnabled(False)
    menu.addSeparator()
    folder = user_models_dir()
    note = menu.addAction(f"User folder: {folder}" + ("" if folder.is_dir() else " (none yet)"))
    note.setEnabled(False)


def _fill_recent(window: MenuHost, menu: QMenu) -> None:
    menu.clear()
    names = window.settings.recent_files()
    for name in names:
        action = menu.addAction(Path(name).name)
        action.setToolTip(name)
        action.triggered.connect(lambda _checked=False, path=name: window.open_path(Path(path)))
    if not names:
        menu.addAction("(none)").setEnabled(False)
    else:
        menu.addSeparator()
        menu.addAction("Clear list").triggered.connect(lambda _checked=False: window.settings.clear_recent_files())
