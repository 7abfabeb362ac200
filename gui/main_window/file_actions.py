"""File handling of the main window: dialogs, routing a path by kind, drag and drop, saving labels and overlays."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QFileDialog, QMainWindow, QMessageBox

from leanseg.core.io.images import IMAGE_SUFFIXES, ImageData, to_rgb8
from leanseg.core.io.outputs import OutputPathError, overlay, same_file, write_png
from leanseg.core.model.sources import MODEL_SUFFIXES, is_model_file  # .safetensors, .pt2, .onnx, .leanseg
from leanseg.core.predict import Segmentation

from ..inference.worker import ModelStatus
from ..viewer.legend import OverlayPanel
from .settings import AppSettings

VIDEO_SUFFIXES = (".mp4", ".avi", ".mov", ".mkv", ".webm", ".m4v", ".mpg", ".mpeg")
IMAGE_FILTER = "Images (" + " ".join(f"*{s}" for s in IMAGE_SUFFIXES) + ");;All files (*)"
VIDEO_FILTER = "Videos (" + " ".join(f"*{s}" for s in VIDEO_SUFFIXES) + ");;All files (*)"
MODEL_FILTER = ("Models (" + " ".join(f"*{s}" for s in MODEL_SUFFIXES) + ");;leanseg checkpoints (*.safetensors);;"
                "torch.export programs (*.pt2);;ONNX graphs (*.onnx);;leanseg bundles (*.leanseg);;All files (*)")


def path_kind(path: Path) -> str:
    """'folder', 'video', 'model' or 'image' by the name, and by the content for a name that is none of them
    (anything else is tried as an image and fails with a clear message)."""
    if path.is_dir():
        return "folder"
    suffix = path.suffix.lower()
    if suffix in VIDEO_SUFFIXES:
        return "video"
    if suffix in MODEL_SUFFIXES:
        return "model"
    if suffix not in IMAGE_SUFFIXES and path.is_file() and is_model_file(path):
        return "model"  # a model under another name (mynet.bin): the CLI opens it by content too
    return "image"


def png_name(path: Path) -> Path:
    """`path`, or NAME.png for a NAME without the .png the save dialogs' filter asks for."""
    return path if path.suffix.lower() == ".png" else path.with_name(f"{path.name}.png")


class FileActionsMixin(QMainWindow):
    """Mixed into MainWindow: everything that starts from a file name."""

    if TYPE_CHECKING:  # provided by MainWindow
        settings: AppSettings
        image: ImageData | None
        result: Segmentation | None
        model_status: ModelStatus | None
        overlay_panel: OverlayPanel

        def open_image(self, path: Path, labels: np.ndarray | None = None) -> None: ...
        def open_folder(self, path: Path) -> None: ...
        def open_video(self, path: Path) -> None: ...
        def open_model(self, path: Path) -> None: ...
        def show_error(self, title: str, message: str) -> None: ...

    def open_path(self, path: Path) -> None:
        """Open an image, folder, video or model file by what it is."""
        path = Path(path)
        kind = path_kind(path)
        if kind == "folder":
            self.open_folder(path)
        elif kind == "video":
            self.open_video(path)
        elif kind == "model":
            self.open_model(path)
        else:
            self.open_image(path)

    # -- dialogs ----------------------------------------------------------------------------------------------
    def choose_image(self) -> None:
        name, _ = QFileDialog.getOpenFileName(self, "Open image", self.settings.last_dir("image"), IMAGE_FILTER)
        if name:
            self.open_image(Path(name))

    def choose_folder(self) -> None:
        name = QFileDialog.getExistingDirectory(self, "Open folder", self.settings.last_dir("folder"))
        if name:
            self.open_folder(Path(name))

    def choose_video(self) -> None:
        name, _ = QFileDialog.getOpenFileName(self, "Open video", self.settings.last_dir("video"), VIDEO_FILTER)
        if name:
            self.open_video(Path(name))

    def choose_model(self) -> None:
        name, _ = QFileDialog.getOpenFileName(self, "Open model", self.settings.last_dir("model"), MODEL_FILTER)
        if name:
            self.open_model(Path(name))

    # -- drag and drop ----------------------------------------------------------------------------------------
    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        urls = event.mimeData().urls() if event.mimeData().hasUrls() else []
        if urls and all(url.isLocalFile() for url in urls):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dropEvent(self, event: QDropEvent) -> None:
        paths = [Path(url.toLocalFile()) for url in event.mimeData().urls() if url.isLocalFile()]
        if not paths:
            event.ignore()
            return
        event.acceptProposedAction()
        self.open_path(paths[0])
        if len(paths) > 1:
            self.statusBar().showMessage(f"Opened {paths[0].name}; drop a folder to segment many images", 5000)

    # -- saving -----------------------------------------------------------------------------------------------
    def save_labels(self, path: Path | None = None) -> Path | None:
        """Write the labels as a PNG of class indices (asks for a name when `path` is None)."""
        if self.result is None:
            self.statusBar().showMessage("Nothing to save yet: segment an image first", 5000)
            return None
        path = path or self._ask_save_path("Save labels", "_labels.png")
        if path is None:
            return None
        return self._write(path, self.result.labels)

    def save_overlay(self, path: Path | None = None) -> Path | None:
        """Write the image with the visible classes blended in at the current opacity."""
        if self.result is None or self.image is None or self.model_status is None:
            self.statusBar().showMessage("Nothing to save yet: segment an image first", 5000)
            return None
        path = path or self._ask_save_path("Save overlay", "_overlay.png")
        if path is None:
            return None
        rgb = to_rgb8(self.image)
        labels = self.result.labels
        blended = overlay(rgb, labels, self.model_status.info.class_colours, self.overlay_panel.opacity.value() / 100)
        hidden = np.isin(labels, list(self.overlay_panel.legend.hidden))
        return self._write(path, np.where(hidden[..., None], rgb, blended))

    def _ask_save_path(self, title: str, suffix: str) -> Path | None:
        """The PNG to write, asked for; the open image is refused before any question, and an existing file is
        replaced only when the user says so here (Qt's own question is off: it would name NAME, not NAME.png)."""
        stem = self.image.path.stem if self.image is not None and self.image.path is not None else "image"
        start = str(Path(self.settings.last_dir("save")) / f"{stem}{suffix}")
        name, _ = QFileDialog.getSaveFileName(self, title, start, "PNG images (*.png)",
                                              options=QFileDialog.Option.DontConfirmOverwrite)  # we ask below
        if not name:
            return None
        path = png_name(Path(name))
        if self._refuse_open_image(path):
            return None
        replace = QMessageBox.StandardButton.Yes
        if path.exists() and QMessageBox.question(self, title, f"{path.name} already exists. Replace it?",
                                                  replace | QMessageBox.StandardButton.No) != replace:
            return None
        return path

    def _refuse_open_image(self, path: Path) -> bool:
        """Say so and return True when `path` is the open image (or a link to it): an input is never overwritten."""
        source = self.image.path if self.image is not None else None
        if source is None or not same_file(path, source):
            return False
        self.show_error("Could not save", f"Could not save: {path} is the image that is open, and an input is "
                                          "never overwritten; choose another name")
        return True

    def _write(self, path: Path, pixels: np.ndarray) -> Path | None:
        """Write `pixels` as a PNG; a name without .png gets it (as the save dialog's filter says). The open image
        is never written over (the CLI refuses its inputs as outputs the same way)."""
        path = png_name(path)
        if self._refuse_open_image(path):
            return None
        try:
            written = write_png(path, pixels)
        except OutputPathError as err:  # names the file already
            self.show_error("Could not save", f"Could not save: {err}")
            return None
        except (OSError, ValueError) as err:
            self.show_error("Could not save", f"Could not write {path}: {err}")
            return None
        self.settings.remember_dir("save", written)
        self.statusBar().showMessage(f"Saved {written}", 5000)
        return written
