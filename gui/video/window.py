"""Hooks the video panel into the main window: File > Open video and dropped videos land here.

`show_video(window, path)` is all the main window calls; the panel follows the window's model and
options and marks export events on its memory timeline. The window stops the panel's threads when it closes
(`VideoPanel.shutdown`), once it has asked about a running export.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt

from leanseg.core.predict import InferenceOptions

from .panel import VideoPanel


def video_options(options: InferenceOptions) -> InferenceOptions:
    """Video runs without mirror or multi-scale averaging, which would halve the frame rate or cut it to a third
    (`leanseg video`'s defaults too)."""
    return replace(options, mirror="off", scales=(1.0,))


def show_video(window: Any, path: Path) -> VideoPanel:
    """The main window's `open_video`: open `path` in its video panel (made on first use) and show it.

    Uses the window's current model and inference options, follows later model changes, marks the
    export's job events on the memory timeline and shows errors through `window.show_error`.
    """
    panel: VideoPanel | None = getattr(window, "video_panel", None)
    options = video_options(window.controls.options())
    if panel is None:
        panel = VideoPanel(window, window.model_requested, options)
        panel.setWindowFlag(Qt.WindowType.Window, True)
        window.video_panel = panel
        window.model_changed.connect(lambda status: panel.set_model(window.model_requested,
                                                                            video_options(status.options)))
        panel.job_event.connect(lambda event: window.monitor.mark_event(event) if window.monitor else None)
        panel.error_shown.connect(lambda message: window.show_status_error(message, 10000))
    elif (panel.model_path, panel.options) != (window.model_requested, options):
        panel.set_model(window.model_requested, options)
    if panel.open_video(Path(path)):
        panel.show()
        panel.raise_()
        panel.activateWindow()
    else:
        window.show_error("Open video", panel.export_label.text())
    return panel
