"""The batch dialog's results table: one row per image (file, size, seconds, status, message: why a failed
image failed, or what reading did to a segmented one, e.g. "first of 3 pages").

Names and figures are sized to their contents, so no file name is cut off; Message, last, takes the rest.
A failed image's row is red, and stays red (a brighter red) when it is selected.
"""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTableWidget,
    QTableWidgetItem,
    QWidget,
)

from leanseg.core.jobs.manifest import ImageRecord

COLUMNS = ("File", "Size", "Seconds", "Status", "Message")
STATUS_COLUMN = COLUMNS.index("Status")
MESSAGE_COLUMN = COLUMNS.index("Message")
FAILED_BACKGROUND = QColor(110, 40, 36)  # a failed image's row
FAILED_SELECTED = QColor(168, 52, 44)  # the same row while selected: red still, brighter than the rest
FAILED_TEXT = QColor(255, 214, 208)
FAILED_ROLE = Qt.ItemDataRole.UserRole + 1  # True on the items of a failed image's row


class FailedRowDelegate(QStyledItemDelegate):
    """Draws the selection of a failed row in red instead of the accent colour."""

    def initStyleOption(self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> None:
        super().initStyleOption(option, index)
        if index.data(FAILED_ROLE):
            option.palette.setColor(QPalette.ColorRole.Highlight, FAILED_SELECTED)
            option.palette.setColor(QPalette.ColorRole.HighlightedText, QColor("white"))


class ResultsTable(QTableWidget):
    """Rows keyed by the image's path relative to the input folder; a row updates in place on a rerun."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(0, len(COLUMNS), parent)
        self._rows: dict[str, int] = {}  # source (relative path) -> row
        self.setHorizontalHeaderLabels(COLUMNS)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.verticalHeader().hide()
        self.setItemDelegate(FailedRowDelegate(self))
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
        failed = status == "failed"
        reason = record.error.removeprefix(f"{in_dir / record.source}: ")  # the File column names the image
        message = reason if record.status != "ok" else record.note
        items = [QTableWidgetItem(text) for text in (record.source, size, seconds, status, message)]
        for column, item in enumerate(items):
            if failed:  # marked so it stands out in a long list; the whole reason in the tooltip
                item.setBackground(FAILED_BACKGROUND)
                item.setForeground(FAILED_TEXT)
                item.setToolTip(record.error)
                item.setData(FAILED_ROLE, True)
            self.setItem(row, column, item)
        if not failed and message:
            items[MESSAGE_COLUMN].setToolTip(message)  # a long note, whole
        if record.status == "ok" and "labels" in record.outputs:
            paths = (str(in_dir / record.source), str(out_dir / record.outputs["labels"].path))
            items[0].setData(Qt.ItemDataRole.UserRole, paths)

    def failed_rows(self) -> list[int]:
        """The rows of images that failed, top to bottom."""
        return [row for row in range(self.rowCount()) if self._status_text(row) == "failed"]

    def file_name(self, row: int) -> str:
        """Row `row`'s image as the File column names it (its path relative to the input folder)."""
        return self._text(row, 0)

    def _status_text(self, row: int) -> str:
        return self._text(row, STATUS_COLUMN)

    def _text(self, row: int, column: int) -> str:
        item = self.item(row, column)
        return item.text() if item is not None else ""

    def show_next_failed(self) -> int | None:
        """Select and scroll to the first failed row below the current one (wrapping round); its row, or None."""
        rows = self.failed_rows()
        if not rows:
            return None
        row = next((r for r in rows if r > self.currentRow()), rows[0])
        self.selectRow(row)
        self.scrollTo(self.model().index(row, 0), QAbstractItemView.ScrollHint.PositionAtCenter)
        return row

    def failure(self, row: int) -> tuple[str, str] | None:
        """(file, why) of row `row` as its File and Message columns say them, if its image failed; else None."""
        if self._status_text(row) != "failed":
            return None
        return self.file_name(row), self._text(row, MESSAGE_COLUMN)

    def result_paths(self, row: int) -> tuple[Path, Path] | None:
        """(image, labels) of row `row`, or None where it has no labels (failed, or no such row)."""
        item = self.item(row, 0)
        paths = item.data(Qt.ItemDataRole.UserRole) if item is not None else None
        return (Path(paths[0]), Path(paths[1])) if paths is not None else None
