"""The batch dialog's results table: one row per image (file, size, seconds, status, message).

Names and figures are sized to their contents, so no file name is cut off; Message, last, takes the rest.
"""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem, QWidget

from leanseg.core.jobs.manifest import ImageRecord

COLUMNS = ("File", "Size", "Seconds", "Status", "Message")


class ResultsTable(QTableWidget):
    """Rows keyed by the image's path relative to the input folder; a row updates in place on a rerun."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(0, len(COLUMNS), parent)
        self._rows: dict[str, int] = {}  # source (relative path) -> row
        self.setHorizontalHeaderLabels(COLUMNS)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.verticalHeader().hide()
        header = self.horizontalHeader()
        for column in range(len(COLUMNS) - 1):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(len(COLUMNS) - 1, QHeaderView.ResizeMode.Stretch)
        self.setToolTip("Double-click a row to show the image with its labels in the viewer")

    def clear_results(self) -> None:
        self.setRowCount(0)
        self._rows.clear()

    def add_record(self, record: ImageRecord, status: str, in_dir: Path, out_dir: Path) -> None:
        """Show `record` with `status` ('ok', 'failed', 'done before'); an ok row remembers its image and labels."""
        row = self._rows.get(record.source)
        if row is None:
            row = self._rows[record.source] = self.rowCount()
            self.insertRow(row)
        size = f"{record.width} × {record.height}" if record.width else ""
        seconds = f"{record.seconds:.2f}" if record.status == "ok" else ""
        for column, text in enumerate((record.source, size, seconds, status, record.error)):
            self.setItem(row, column, QTableWidgetItem(text))
        if record.status == "ok" and "labels" in record.outputs:
            paths = (str(in_dir / record.source), str(out_dir / record.outputs["labels"].path))
            self.item(row, 0).setData(Qt.ItemDataRole.UserRole, paths)

    def result_paths(self, row: int) -> tuple[Path, Path] | None:
        """(image, labels) of row `row`, or None where it has no labels (failed, or no such row)."""
        item = self.item(row, 0)
        paths = item.data(Qt.ItemDataRole.UserRole) if item is not None else None
        return (Path(paths[0]), Path(paths[1])) if paths is not None else None
