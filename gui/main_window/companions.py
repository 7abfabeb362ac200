"""The main window's companion windows: the batch dialog (folders) and the video panel.

Each lives in its own module, written beside this one; they are imported on first use, and a missing one
makes its menu entry say so instead of failing.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from leanseg.core.io.images import ImageReadError, read_image

if TYPE_CHECKING:
    from .main_window import MainWindow


def open_batch(window: MainWindow, folder: Path) -> None:
    """Show the batch dialog for `folder` (one dialog per window, reused); its results open in the viewer."""
    try:
        from .batch_dialog import BatchDialog
    except ImportError as err:
        window.show_error("Open folder", f"Batch processing of folders is not available ({err}).")
        return
    dialog = getattr(window, "batch_dialog", None)
    if dialog is None or dialog.running:
        dialog = BatchDialog(window, model_path=window.model_requested, options=window.controls.options(),
                             in_dir=folder)
        dialog.open_result.connect(lambda image, labels: open_labelled(window, Path(image), Path(labels)))
        dialog.job_event.connect(lambda event: window.monitor.mark_event(event) if window.monitor else None)
        window.batch_dialog = dialog  # type: ignore[attr-defined]
    else:
        dialog.set_model(window.model_requested, window.controls.options())
        dialog.in_edit.setText(str(folder))
        dialog._on_input_edited(str(folder))
    dialog.show()
    dialog.raise_()


def open_video(window: MainWindow, path: Path) -> None:
    """Open `path` in the video panel."""
    try:
        from .video_window import show_video
    except ImportError as err:
        window.show_error("Open video", f"Video segmentation is not available ({err}).")
        return
    show_video(window, path)


def open_labelled(window: MainWindow, image_path: Path, labels_path: Path) -> None:
    """Show an image with labels saved earlier (a batch result) as its overlay, without segmenting again."""
    try:
        labels = read_image(labels_path).pixels
    except ImageReadError as err:
        window.show_error("Open result", f"Could not read the labels: {err}")
        return
    if labels.ndim != 2:
        window.show_error("Open result", f"{labels_path}: not a labels image (expected one channel of classes)")
        return
    window.open_image(image_path, labels=labels)
