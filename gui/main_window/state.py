"""Save and restore the main window's state through AppSettings: geometry, docks, choices, overlay, model."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from leanseg.core.device import available_devices
from leanseg.core.predict import InferenceOptions

if TYPE_CHECKING:
    from .main_window import MainWindow

DEFAULT_SIZE = (1440, 900)


def default_device() -> str:
    """The first CUDA device when there is one, else the CPU."""
    devices = available_devices()
    return devices[1] if len(devices) > 1 else devices[0]


def restore(window: MainWindow) -> None:
    """Apply saved settings to a freshly built window (before any model or image is opened)."""
    settings = window.settings
    geometry = settings.blob("window/geometry")
    if geometry is None or not window.restoreGeometry(geometry):
        window.resize(*DEFAULT_SIZE)
    state = settings.blob("window/state")
    if state is not None:
        window.restoreState(state)
    device = settings.text("inference/device", default_device())
    if device not in available_devices():
        device = default_device()
    budget_mb = int(settings.number("inference/memory_budget_mb", 0))
    try:
        options = InferenceOptions(
            device=device,
            engine=settings.text("inference/engine", InferenceOptions.engine),
            precision=settings.text("inference/precision", "fp32"),
            memory_budget=budget_mb * 1_000_000 if budget_mb > 0 else None,
            tiling=settings.text("inference/tiling", "auto"),
        )
    except ValueError:  # settings from another version: start from the defaults
        options = InferenceOptions(device=device)
    window.controls.set_options(options)
    window.overlay_panel.set_opacity(settings.number("overlay/opacity", 0.5))
    window.overlay_panel.show_overlay.setChecked(settings.flag("overlay/visible", True))


def remembered_model(window: MainWindow) -> Path | None:
    """The model file used last time, if it still exists."""
    name = window.settings.text("model/path")
    return Path(name) if name and Path(name).is_file() else None


def save(window: MainWindow) -> None:
    settings = window.settings
    settings.set_blob("window/geometry", window.saveGeometry())
    settings.set_blob("window/state", window.saveState())
    options = window.controls.options()
    settings.set_text("inference/device", options.device)
    settings.set_text("inference/engine", options.engine)
    settings.set_text("inference/precision", options.precision)
    settings.set_number("inference/memory_budget_mb", (options.memory_budget or 0) // 1_000_000)
    settings.set_text("inference/tiling", options.tiling)
    settings.set_number("overlay/opacity", window.overlay_panel.opacity.value() / 100)
    settings.set_flag("overlay/visible", window.overlay_panel.show_overlay.isChecked())
    if window.model_status is not None and window.model_status.path is not None:
        settings.set_text("model/path", str(window.model_status.path))
    settings.sync()
