"""The main window's companion windows: the batch dialog (folders), the video panel and the memory lab.

Mixed into MainWindow. Each companion lives in its own package and knows nothing of the main window: it is
given the model file, the options and the callbacks it needs. Batch and video are imported on first use, and
a missing one makes its menu entry say so instead of failing. Closing the window asks first while a batch or a
video export runs, and stops them when the answer is Quit.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMainWindow, QMessageBox

from leanseg.core.io.images import ImageReadError, read_image
from leanseg.core.memory import MemoryMonitor
from leanseg.core.profile import ModelSpec, default_spec

from ..inference.worker import ModelStatus
from ..memory_lab.window import MemoryLabWindow
from ..viewer.controls import InferenceControls


class CompanionsMixin(QMainWindow):
    """Opens and reuses the companion windows; MainWindow provides the attributes used here."""

    if TYPE_CHECKING:  # provided by MainWindow
        model_status: ModelStatus | None
        model_requested: Path | None
        monitor: MemoryMonitor | None
        controls: InferenceControls

        def open_image(self, path: Path, labels: np.ndarray | None = None) -> None: ...
        def show_error(self, title: str, message: str) -> None: ...

    def open_batch(self, folder: Path) -> None:
        """Show the batch dialog for `folder` (one dialog per window, reused); its results open in the viewer."""
        try:
            from ..batch.dialog import BatchDialog
        except ImportError as err:
            self.show_error("Open folder", f"Batch processing of folders is not available ({err}).")
            return
        dialog = getattr(self, "batch_dialog", None)
        if dialog is None or dialog.running:
            dialog = BatchDialog(self, model_path=self.model_requested, options=self.controls.options(),
                                 in_dir=folder)
            dialog.open_result.connect(lambda image, labels: self.open_labelled(Path(image), Path(labels)))
            dialog.job_event.connect(lambda event: self.monitor.mark_event(event) if self.monitor else None)
            self.batch_dialog = dialog
        else:
            dialog.set_model(self.model_requested, self.controls.options())
            dialog.set_input_folder(folder)
        dialog.show()
        dialog.raise_()

    def open_video_panel(self, path: Path) -> None:
        """Open `path` in the video panel."""
        try:
            from ..video.window import show_video
        except ImportError as err:
            self.show_error("Open video", f"Video segmentation is not available ({err}).")
            return
        show_video(self, path)

    def running_work(self) -> list[tuple[str, str]]:
        """What closing the window would stop, as (what runs, what becomes of it when stopped): a running batch,
        a running video export. A single image's segmentation is not listed: it is redone in a moment."""
        work = []
        dialog = getattr(self, "batch_dialog", None)
        if dialog is not None and dialog.running:
            folder = Path(dialog.in_edit.text().strip())
            work.append((f"A batch is running: {dialog.progress_text()}.",
                         f"The images done are kept: run the batch on {folder.name} again (output folder "
                         f"{Path(dialog.out_edit.text().strip()).name}) and it resumes where it stopped."))
        panel = getattr(self, "video_panel", None)
        if panel is not None and panel.exporting:
            work.append((f"A video export is running: {panel.export_progress_text()}.",
                         "The exported video keeps the frames written so far, and plays."))
        return work

    def confirm_quit(self, work: list[tuple[str, str]]) -> bool:
        """Ask whether to quit and stop `work` (`running_work`); True for Quit. Cancel is the default, so Enter or
        Esc keep the work going."""
        stop = "it" if len(work) == 1 else "them"
        box = QMessageBox(QMessageBox.Icon.Question, "Quit leanseg?",
                          " ".join(running for running, _ in work) + f" Quit and stop {stop}?",
                          QMessageBox.StandardButton.NoButton, self)
        box.setInformativeText(" ".join(afterwards for _, afterwards in work))
        quit_button = box.addButton("Quit", QMessageBox.ButtonRole.AcceptRole)
        box.setDefaultButton(box.addButton(QMessageBox.StandardButton.Cancel))
        box.exec()
        return box.clickedButton() is quit_button

    def stop_companions(self) -> None:
        """Stop a running batch and a running video export (each keeps what it finished) and join their threads."""
        batch_dialog = getattr(self, "batch_dialog", None)
        if batch_dialog is not None:
            batch_dialog.reject()  # its finished signal cancels a running batch and joins its thread
        video_panel = getattr(self, "video_panel", None)
        if video_panel is not None:
            video_panel.shutdown()  # playback and export; the export finalises what it wrote

    def open_labelled(self, image_path: Path, labels_path: Path) -> None:
        """Show an image with labels saved earlier (a batch result) as its overlay, without segmenting again."""
        try:
            labels = read_image(labels_path).pixels
        except ImageReadError as err:
            self.show_error("Open result", f"Could not read the labels: {err}")
            return
        if labels.ndim != 2:
            self.show_error("Open result", f"{labels_path}: not a labels image (expected one channel of classes)")
            return
        self.open_image(image_path, labels=labels)

    def install_memory_lab(self) -> QAction:
        """A Tools > Memory lab… entry that opens the lab for the loaded model."""
        action = QAction("&Memory lab…", self)
        action.setStatusTip("Where memory goes, in training and at test time, for the loaded model")
        action.triggered.connect(lambda _checked=False: self.open_memory_lab())
        self.menuBar().addMenu("&Tools").addAction(action)
        return action

    def open_memory_lab(self) -> MemoryLabWindow:
        """Show (or raise) the lab window for this window's model."""
        status = self.model_status
        path = (status.path if status is not None else None) or self.model_requested
        spec, text = (ModelSpec(str(path)), Path(path).name) if path else default_spec()
        lab: MemoryLabWindow | None = getattr(self, "memory_lab", None)
        if lab is None:
            lab = MemoryLabWindow(spec, text)
            self.memory_lab = lab
        elif not lab.runner.busy():
            lab.set_model(spec, text)
        lab.show()
        lab.raise_()
        return lab
