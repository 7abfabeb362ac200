"""A layout that sets its widgets out left to right and starts a new row where the next one would not fit, so a
row of check boxes wraps in a narrow window instead of holding it wide (after Qt's Flow Layout example)."""
from __future__ import annotations

from PySide6.QtCore import QMargins, QPoint, QRect, QSize, Qt
from PySide6.QtWidgets import QLayout, QLayoutItem, QWidget

GAP_PX = (12, 2)  # space between two widgets in a row, and between two rows


class FlowLayout(QLayout):
    """Widgets in rows as wide as the layout; it asks for one row but needs only its widest widget's width."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._items: list[QLayoutItem] = []
        self.setContentsMargins(QMargins(0, 0, 0, 0))

    def addItem(self, item: QLayoutItem) -> None:
        self._items.append(item)

    def count(self) -> int:
        return len(self._items)

    def itemAt(self, index: int) -> QLayoutItem | None:  # type: ignore[override]
        return self._items[index] if 0 <= index < len(self._items) else None

    def takeAt(self, index: int) -> QLayoutItem | None:  # type: ignore[override]
        return self._items.pop(index) if 0 <= index < len(self._items) else None

    def expandingDirections(self) -> Qt.Orientation:
        return Qt.Orientation(0)

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        return self._arrange(QRect(0, 0, width, 0), move=False)

    def setGeometry(self, rect: QRect) -> None:
        super().setGeometry(rect)
        self._arrange(rect, move=True)

    def sizeHint(self) -> QSize:
        """All the widgets in one row."""
        hints = [item.sizeHint() for item in self._items]
        width = sum(hint.width() for hint in hints) + GAP_PX[0] * max(len(hints) - 1, 0)
        return self._with_margins(QSize(width, max((hint.height() for hint in hints), default=0)))

    def minimumSize(self) -> QSize:
        """One widget a row: the widest one's width."""
        size = QSize()
        for item in self._items:
            size = size.expandedTo(item.minimumSize())
        return self._with_margins(size)

    def _with_margins(self, size: QSize) -> QSize:
        margins = self.contentsMargins()
        return size + QSize(margins.left() + margins.right(), margins.top() + margins.bottom())

    def _arrange(self, rect: QRect, move: bool) -> int:
        """Place the widgets in rows within `rect` (when `move`); returns the height the rows take."""
        margins = self.contentsMargins()
        area = rect.adjusted(margins.left(), margins.top(), -margins.right(), -margins.bottom())
        x, y, row_height = area.x(), area.y(), 0
        for item in self._items:
            hint = item.sizeHint()
            if x > area.x() and x + hint.width() > area.right() + 1:  # no room left in this row: start the next
                x, y, row_height = area.x(), y + row_height + GAP_PX[1], 0
            if move:
                item.setGeometry(QRect(QPoint(x, y), hint))
            x += hint.width() + GAP_PX[0]
            row_height = max(row_height, hint.height())
        return y + row_height - rect.y() + margins.bottom()
