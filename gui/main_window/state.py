"""Save and restore the main window's state through AppSettings: geometry, docks, the memory dock's given height,
choices, overlay, model."""
from __future__ import annotations

import math
from pathlib import Path

from PySide6.QtWidgets import QMainWindow

from leanseg.core.device import available_devices
from leanseg.core.engine.multiscale import check_scales, format_scales
from leanseg.core.predict import InferenceOptions

from ..viewer.controls import InferenceControls
from ..viewer.legend import OverlayPanel
from .memory_dock import MEMORY_HEIGHT, MemoryDockHeight
from .settings import AppSettings

DEFAULT_SIZE = (1440, 900)


def default_device() -> str:
    """The first CUDA device when there is one, else the CPU."""
    devices = available_devices()
    return devices[1] if len(devices) > 1 else devices[0]


def stored_scales(text: str) -> tuple[float, ...]:
    """The scales saved as "0.75 1 1.25"; the image's size alone, (1.0,), for anything unreadable."""
    try:
        return check_scales(tuple(float(word) for word in text.split()))
    except ValueError:
        return (1.0,)


def given_height(saved: float) -> int:
    """The memory dock's saved height in px; MEMORY_HEIGHT for one that is not a height (nan, inf, 0 or less)."""
    return round(saved) if math.isfinite(saved) and round(saved) > 0 else MEMORY_HEIGHT


def restore(window: QMainWindow, settings: AppSettings, controls: InferenceControls, overlay_panel: OverlayPanel,
            memory_height: MemoryDockHeight) -> None:
    """Apply saved settings to a freshly built window and its panels (before any model or image is opened)."""
    geometry = settings.blob("window/geometry")
    if geometry is None or not window.restoreGeometry(geometry):
        window.resize(*DEFAULT_SIZE)
    state = settings.blob("window/state")
    if state is not None:
        window.restoreState(state)
    memory_height.wanted = given_height(settings.number("window/memory_height", MEMORY_HEIGHT))  # as left
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
            mirror=settings.text("inference/mirror", "flip"),
            scales=stored_scales(settings.text("inference/scales", "1")),
        )
    except ValueError:  # settings from another version: start from the defaults
        options = InferenceOptions(device=device, mirror="flip")
    controls.set_options(options)
    overlay_panel.set_opacity(settings.number("overlay/opacity", 0.5))
    overlay_panel.show_overlay.setChecked(settings.flag("overlay/visible", True))


def remembered_model(settings: AppSettings) -> Path | None:
    """The model file used last time, if it still exists."""
    name = settings.text("model/path")
    return Path(name) if name and Path(name).is_file() else None


def save(window: QMainWindow, settings: AppSettings, controls: InferenceControls, overlay_panel: OverlayPanel,
         memory_height: MemoryDockHeight, model_path: Path | None) -> None:
    """Store the window's geometry and docks, the inference choices, the overlay and the model in use."""
    settings.set_blob("window/geometry", window.saveGeometry())
    settings.set_blob("window/state", window.saveState())
    settings.set_number("window/memory_height", memory_height.wanted)
    options = controls.options()
    settings.set_text("inference/device", options.device)
    settings.set_text("inference/engine", options.engine)
    settings.set_text("inference/precision", options.precision)
    settings.set_number("inference/memory_budget_mb", (options.memory_budget or 0) // 1_000_000)
    settings.set_text("inference/tiling", options.tiling)
    settings.set_text("inference/mirror", options.mirror)
    settings.set_text("inference/scales", format_scales(options.scales))
    settings.set_number("overlay/opacity", overlay_panel.opacity.value() / 100)
    settings.set_flag("overlay/visible", overlay_panel.show_overlay.isChecked())
    if model_path is not None:
        settings.set_text("model/path", str(model_path))
    settings.sync()
