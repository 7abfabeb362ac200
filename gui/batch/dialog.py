"""The batch dialog: segment a folder with progress, Cancel and Resume, and a table of results.

The batch itself is `leanseg.core.jobs.batch.run_batch` (the CLI's job) on its own thread; this
dialog only turns its events into widgets. Activating a result row emits `open_result(image, labels)`
for the main window to show the image with its overlay; activating a failed row says why it failed.
"""
from __future__ import annotations

import html
from dataclasses import replace
from pathlib import Path
from typing import Any

from PySide6.QtCore import QUrl, Signal
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QFileDialog,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from leanseg.core.assets import default_model_path
from leanseg.core.events import JobEvent
from leanseg.core.jobs.batch import BatchSummary
from leanseg.core.jobs.batch_plan import BatchSettings
from leanseg.core.jobs.manifest import MANIFEST_NAME, ImageRecord, recorded_outputs
from leanseg.core.predict import InferenceOptions

from ..messages import APP_RECURSE, for_the_app
from .count import BatchCount
from .results_table import ResultsTable
from .runner import BatchRequest, BatchThread
from .texts import default_output_folder, quote_paths

_ERROR_STYLE = "<span style='color:#e06c5a'>"  # how the status line begins while it shows an error
_CHOOSE_FOLDER, _READY = "Choose a folder and press Start.", "Ready: press"  # the status line with nothing to say


class BatchDialog(QDialog):
    open_result = Signal(object, object)  # image Path, labels Path: show this result in the viewer
    batch_finished = Signal(object)  # BatchSummary, also when cancelled
    batch_failed = Signal(str)  # the batch could not run, with the reason
    job_event = Signal(object)  # every JobEvent, for the memory timeline

    def __init__(self, parent: QWidget | None = None, model_path: Path | None = None,
                 options: InferenceOptions | None = None, in_dir: Path | None = None,
                 out_dir: Path | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Segment a folder")
        self.model_path = model_path
        self.options = options or InferenceOptions()
        self.running = False
        self.summary: BatchSummary | None = None
        self._thread: BatchThread | None = None
        self._count = BatchCount()  # how far the run shown has got
        self._results_for = ""  # the input folder the table and bar describe
        self._recorded: tuple[tuple[Path, int, int], dict[str, Any] | None] | None = None  # manifest stat, outputs
        self._build()
        self.set_model(model_path, self.options)
        if in_dir is not None:
            self.in_edit.setText(str(in_dir))
            self.out_edit.setText(str(out_dir or default_output_folder(Path(in_dir))))
        elif out_dir is not None:
            self.out_edit.setText(str(out_dir))
        self.finished.connect(self._shutdown)  # QDialog.finished: closed by any means
        self._refresh()
        self.status.setText(self._ready_text())

    # -- construction ---------------------------------------------------------------------------------------
    def _build(self) -> None:
        self.in_edit, self.out_edit = QLineEdit(), QLineEdit()
        self.in_edit.setPlaceholderText("folder of images")
        self.out_edit.setPlaceholderText("folder for labels, overlays, summary.csv")
        in_browse, out_browse = QPushButton("Browse…"), QPushButton("Browse…")
        in_browse.clicked.connect(lambda: self._choose_folder(self.in_edit, "Input folder"))
        out_browse.clicked.connect(lambda: self._choose_folder(self.out_edit, "Output folder"))
        self.in_edit.textChanged.connect(self._on_input_changed)
        self.out_edit.textChanged.connect(self._on_fields_changed)
        folders = QGridLayout()
        for row, (label, edit, browse) in enumerate((("Input folder", self.in_edit, in_browse),
                                                     ("Output folder", self.out_edit, out_browse))):
            folders.addWidget(QLabel(label), row, 0)
            folders.addWidget(edit, row, 1)
            folders.addWidget(browse, row, 2)
        self.recursive = QCheckBox("Include sub-folders")
        self.overlay = QCheckBox("Write overlays")
        self.overlay.setChecked(True)
        self.probs = QCheckBox("Write probabilities (.npy)")
        self.overwrite = QCheckBox("Redo everything (replace outputs)")
        options = QHBoxLayout()
        for box in (self.recursive, self.overlay, self.probs, self.overwrite):
            box.toggled.connect(self._on_fields_changed)
            options.addWidget(box)
        options.addStretch(1)
        self.model_label = QLabel()
        self.progress = QProgressBar()
        self.progress.setFormat("%v of %m")
        self.status = QLabel(_CHOOSE_FOLDER)
        self.status.setWordWrap(True)
        self.table = ResultsTable()
        self.table.cellActivated.connect(self.open_row)
        self.table.cellDoubleClicked.connect(self.open_row)
        self.start_button = QPushButton("Start")
        self.start_button.clicked.connect(self.start)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(self.cancel)
        self.next_failed_button = QPushButton("Next failed")
        self.next_failed_button.setToolTip("Select the next image that failed in the table (its row is red)")
        self.next_failed_button.clicked.connect(self.table.show_next_failed)
        self.open_output_button = QPushButton("Open output folder")
        self.open_output_button.clicked.connect(self.open_output_folder)
        close_button = QPushButton("Close")
        close_button.clicked.connect(self.reject)
        buttons = QHBoxLayout()
        for button in (self.start_button, self.cancel_button, self.next_failed_button, self.open_output_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        buttons.addWidget(close_button)
        layout = QVBoxLayout(self)
        layout.addLayout(folders)
        layout.addLayout(options)
        layout.addWidget(self.model_label)
        layout.addWidget(self.progress)
        layout.addWidget(self.status)
        layout.addWidget(self.table, 1)
        layout.addLayout(buttons)
        for button in self.findChildren(QPushButton):
            button.setAutoDefault(False)  # Enter on a table row opens that row; it never presses a button
        self.resize(760, 520)

    # -- user -> job ----------------------------------------------------------------------------------------
    def set_model(self, model_path: Path | None, options: InferenceOptions) -> None:
        """The model file and options the next batch uses (the main window's current ones)."""
        self.model_path = model_path
        self.options = options
        name = model_path.name if model_path is not None else "no model"
        self.model_label.setText(" · ".join([f"Model: {name}", options.device, f"engine {options.engine}",
                                             options.precision, *options.averaging]))

    def set_input_folder(self, folder: Path) -> None:
        """Point the dialog at `folder`; the output folder follows unless the user typed one."""
        self.in_edit.setText(str(folder))

    def settings(self) -> BatchSettings:
        """The batch as the widgets describe it; ValueError says what is wrong."""
        if not self.in_edit.text().strip() or not self.out_edit.text().strip():
            raise ValueError("Choose an input folder and an output folder.")
        return BatchSettings(Path(self.in_edit.text().strip()), Path(self.out_edit.text().strip()),
                             recursive=self.recursive.isChecked(), write_overlay=self.overlay.isChecked(),
                             write_probs=self.probs.isChecked(), overwrite=self.overwrite.isChecked(),
                             how_to_overwrite="tick Redo everything")  # the CLI's --overwrite is that checkbox

    def start(self) -> None:
        """Start (or resume: finished images are skipped) the batch on the batch thread."""
        if self.running:
            return
        model = self.model_path or (default_model_path() if default_model_path().is_file() else None)
        try:
            settings = self.settings()
            if self._outputs_differ():  # the button says Start over: other outputs cannot resume these
                settings = replace(settings, overwrite=True)
            if model is None:
                raise ValueError("No model is loaded: open a model file first (File > Open model).")
        except ValueError as err:
            self._show_failure(str(err))
            return
        options = replace(self.options, want_probs=settings.write_probs)
        thread = self.batch_thread
        self._clear_results()
        self._results_for = self.in_edit.text().strip()
        self.running = True
        self.status.setText(f"Starting: loading {model.name}…")
        self._refresh()
        thread.start(BatchRequest(settings, model, options))

    @property
    def batch_thread(self) -> BatchThread:
        """The thread the batch runs on, started on first use (its runner's signals come from that thread)."""
        if self._thread is None:
            self._thread = BatchThread(self)
            self._thread.runner.job_event.connect(self._on_event)
            self._thread.runner.finished.connect(self._on_finished)
            self._thread.runner.failed.connect(self._on_failed)
        return self._thread

    def cancel(self) -> None:
        """Stop at the next tile or image; what finished is kept, Resume goes on from there."""
        if self._thread is not None and self.running:
            self._thread.cancel()
            self.status.setText("Cancelling…")

    def progress_text(self) -> str:
        """How far the running batch has got: '2 of 4 images done' ('starting' before it has counted them)."""
        return self._count.done_text()

    def open_row(self, row: int, column: int = 0) -> None:
        """Show row `row`'s image with its labels in the main viewer (via `open_result`); for a failed image, or
        one whose labels file is gone, say why in the status line instead ('NAME: why')."""
        failure = self.table.failure(row)
        if failure is not None:
            name, reason = failure
            self._show_error(f"{name}: {for_the_app(reason)}")
            return
        paths = self.table.result_paths(row)
        if paths is None:
            return
        if not paths[1].is_file():
            self._show_error(f"{self.table.file_name(row)}: its labels file {paths[1].name} is no longer in "
                             "the output folder; run the batch again to redo it")
            return
        self.open_result.emit(*paths)

    def open_output_folder(self) -> None:
        folder = Path(self.out_edit.text().strip())
        if folder.is_dir():
            QDesktopServices.openUrl(QUrl.fromLocalFile(str(folder.resolve())))

    # -- job -> widgets -------------------------------------------------------------------------------------
    def _on_event(self, event: JobEvent) -> None:
        if event.kind == "start":
            self._count = BatchCount.of_start(event)
            self.progress.setFormat("%v of %m")
            self.progress.setRange(0, max(self._count.total, 1))
            self.progress.setValue(self._count.before)
            for record in event.data.get("finished_before", []):
                self._add_record(ImageRecord.from_json(record), "done before")
            self.status.setText(event.message)
        elif event.kind == "info" and event.data.get("stage") == "segmenting":
            self.status.setText(self._count.running_text(Path(event.path or "").name))
        elif event.kind in ("image", "error"):
            self._count.count(event)
            self.progress.setValue(self._count.finished)
            self._add_record(ImageRecord.from_json(event.data), "ok" if event.kind == "image" else "failed")
            self.status.setText(self._count.running_text(Path(event.path or "").name))
        self.job_event.emit(event)  # after the widgets show it

    def _on_finished(self, summary: BatchSummary) -> None:
        self.running = False
        self.summary = summary
        failed = f", {len(summary.failed)} failed (red in the table; Next failed finds them)" if summary.failed else ""
        if summary.cancelled:
            text = f"Cancelled: {summary.remaining} image(s) left; press Resume to go on{failed}."
        else:
            text = (f"Done: {len(summary.ok)} segmented in {summary.seconds:.1f} s, "
                    f"{summary.finished_before} finished before{failed}.")
        for note in summary.not_read_notes(APP_RECURSE):
            text += f" {note[0].upper()}{note[1:]}."
        self.status.setText(text)
        self._refresh()
        if summary.failed:
            self.table.setCurrentCell(-1, -1)
            self.table.show_next_failed()  # the first failure in view
        self.batch_finished.emit(summary)

    def _on_failed(self, message: str) -> None:
        self.running = False
        self._show_failure(message)
        self._refresh()

    def _show_failure(self, message: str) -> None:
        """Say in red why the batch could not run, and emit `batch_failed`."""
        message = quote_paths(for_the_app(message), (self.in_edit.text().strip(), self.out_edit.text().strip()))
        message = message[:1].upper() + message[1:]
        self._show_error(message)
        self.batch_failed.emit(message)

    def _show_error(self, message: str) -> None:
        """`message` in red in the status line, until the batch starts or a field changes."""
        self.status.setText(f"{_ERROR_STYLE}{html.escape(message)}</span>")

    def _add_record(self, record: ImageRecord, status: str) -> None:
        self.table.add_record(record, status, Path(self.in_edit.text().strip()), Path(self.out_edit.text().strip()))

    # -- state ----------------------------------------------------------------------------------------------
    def _on_input_changed(self, text: str) -> None:
        another_folder = not self.running and bool(self._results_for) and text.strip() != self._results_for
        if another_folder:
            self._clear_results()  # the last folder's rows, bar and summary are not about this one
        if text.strip() and not self.out_edit.isModified():  # the output folder follows unless the user typed one
            self.out_edit.setText(str(default_output_folder(Path(text.strip()))))
        self._on_fields_changed()
        if another_folder:
            self.status.setText(self._ready_text())

    def _on_fields_changed(self) -> None:
        """A folder or option changed: update the buttons; an error shown is about what was there before, and
        the button to press may be another."""
        self._refresh()
        status = self.status.text()
        if not self.running and (status.startswith((_ERROR_STYLE, _READY)) or status == _CHOOSE_FOLDER):
            self.status.setText(self._ready_text())

    def _ready_text(self) -> str:
        """What the status line says while nothing runs and nothing went wrong: the button to press."""
        if not self.in_edit.text().strip():
            return _CHOOSE_FOLDER
        return f"{_READY} {self.start_button.text()}."

    def _clear_results(self) -> None:
        self.table.clear_results()
        self.summary = None
        self._results_for = ""
        self._count = BatchCount()
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.progress.setFormat("")

    def _choose_folder(self, edit: QLineEdit, title: str) -> None:
        name = QFileDialog.getExistingDirectory(self, title, edit.text() or str(Path.home()))
        if name:
            edit.setText(name)  # an input folder's output follows it (_on_input_changed)

    def _refresh(self) -> None:
        out = Path(self.out_edit.text().strip()) if self.out_edit.text().strip() else None
        resumable = out is not None and (out / MANIFEST_NAME).is_file()
        complete = self._last_run_complete()
        if self.overwrite.isChecked() and resumable:
            text, tip = "Start over", "Redo every image and replace its outputs"
        elif resumable and self._outputs_differ():
            text, tip = "Start over", ("The output folder holds results made with other outputs (overlay or "
                                       "probabilities); this redoes every image and replaces them")
        elif complete is not None and complete.failed:
            text, tip = "Retry failed", f"Try the {len(complete.failed)} failed image(s) again; the rest are done"
        elif complete is not None:
            text, tip = "Run again", ("Every image is done; a new run segments only images added or changed "
                                      "since (tick Redo everything to replace all outputs)")
        elif resumable:
            text, tip = "Resume", "Go on where the last run stopped; finished images are skipped"
        else:
            text, tip = "Start", "Segment every image in the input folder"
        self.start_button.setText(text)
        self.start_button.setToolTip(tip)
        self.start_button.setEnabled(not self.running)
        self.cancel_button.setEnabled(self.running)
        self.open_output_button.setEnabled(out is not None and out.is_dir())
        failed = len(self.table.failed_rows())
        self.next_failed_button.setEnabled(failed > 0)
        self.next_failed_button.setText(f"Next failed ({failed})" if failed else "Next failed")
        for widget in (self.in_edit, self.out_edit, self.recursive, self.overlay, self.probs, self.overwrite):
            widget.setEnabled(not self.running)

    def _outputs_differ(self) -> bool:
        """Whether the output folder's batch results were made with other outputs than the widgets ask for."""
        try:
            settings = self.settings()
        except ValueError:
            return False
        recorded = self._recorded_outputs(settings.out_dir)
        return recorded is not None and recorded != settings.output_options

    def _recorded_outputs(self, out_dir: Path) -> dict[str, Any] | None:
        """`recorded_outputs`, read again only when the manifest changed: the buttons refresh on every keystroke."""
        path = out_dir / MANIFEST_NAME
        try:
            stat = path.stat()
        except OSError:
            return None
        key = (path, stat.st_mtime_ns, stat.st_size)
        if self._recorded is None or self._recorded[0] != key:
            self._recorded = key, recorded_outputs(out_dir)
        return self._recorded[1]

    def _last_run_complete(self) -> BatchSummary | None:
        """The last run's summary if it went through every image of the batch the widgets describe now."""
        summary = self.summary
        if summary is None or summary.cancelled or summary.remaining or self.running:
            return None
        settings = summary.settings
        shown = (self.in_edit.text().strip(), self.out_edit.text().strip(), self.recursive.isChecked(),
                 self.overlay.isChecked(), self.probs.isChecked())
        ran = (str(settings.in_dir), str(settings.out_dir), settings.recursive, settings.write_overlay,
               settings.write_probs)
        return summary if shown == ran else None

    def _shutdown(self) -> None:
        if self._thread is not None:
            self._thread.stop()
            self._thread = None
            self.running = False
