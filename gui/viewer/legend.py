"""The overlay panel: show/hide the overlay, its opacity, and a legend of class colours where a click hides a class."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QSize, Qt, Signal
from PySide6.QtGui import QColor, QIcon, QPainter, QPalette, QPixmap
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QSlider,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QVBoxLayout,
    QWidget,
)

CLASS_ROLE = Qt.ItemDataRole.UserRole
NAME_ROLE = Qt.ItemDataRole.UserRole + 1  # the class's name alone (the display text adds its share)
SHARE_ROLE = Qt.ItemDataRole.UserRole + 2  # "12.5 %", or None before a result
MIN_ROW_WIDTH_PX = 120  # what a row asks for at most; a wider list gives it the rest
SHARE_GAP_PX = 8  # between an elided name and its share


class _LegendRow(QStyledItemDelegate):
    """Paints a row as swatch, name elided in the middle, and the share right-aligned: a long name never hides
    the share (the whole name is in the row's tooltip)."""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex
              ) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        share = index.data(SHARE_ROLE)
        style = opt.widget.style() if opt.widget is not None else QApplication.style()
        share_width = opt.fontMetrics.horizontalAdvance(share) + SHARE_GAP_PX if share else 0
        style.drawPrimitive(QStyle.PrimitiveElement.PE_PanelItemViewItem, opt, painter, opt.widget)
        name_opt = QStyleOptionViewItem(opt)
        name_opt.text = index.data(NAME_ROLE)
        name_opt.textElideMode = Qt.TextElideMode.ElideMiddle
        name_opt.rect = opt.rect.adjusted(0, 0, -share_width, 0)
        style.drawControl(QStyle.ControlElement.CE_ItemViewItem, name_opt, painter, opt.widget)
        if share:
            painter.save()
            painter.setFont(opt.font)
            foreground = index.data(Qt.ItemDataRole.ForegroundRole)
            painter.setPen(foreground.color() if foreground is not None else opt.palette.color(QPalette.ColorRole.Text))
            right = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
            painter.drawText(opt.rect.adjusted(0, 0, -4, 0), right, share)
            painter.restore()

    def sizeHint(self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> QSize:
        hint = super().sizeHint(option, index)
        return QSize(min(hint.width(), MIN_ROW_WIDTH_PX), hint.height())  # the row fits the list: no sideways scroll


def _swatch(colour: Sequence[int], hidden: bool) -> QIcon:
    pixmap = QPixmap(14, 14)
    pixmap.fill(QColor(60, 62, 68) if hidden else QColor(*colour[:3]))
    return QIcon(pixmap)


class ClassLegend(QListWidget):
    """One row per class: colour swatch, name, share of the pixels. Clicking a row hides or shows the class."""

    hidden_changed = Signal(frozenset)  # class indices hidden now

    def __init__(self) -> None:
        super().__init__()
        self.setSelectionMode(QListWidget.SelectionMode.NoSelection)
        self.setToolTip("Click a class to hide or show it in the overlay")
        self.setItemDelegate(_LegendRow(self))
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.itemClicked.connect(self._toggle)
        self._colours: tuple[tuple[int, int, int], ...] = ()
        self._names: tuple[str, ...] = ()
        self._shares: np.ndarray | None = None
        self.hidden: frozenset[int] = frozenset()

    def set_classes(self, names: Sequence[str], colours: Sequence[Sequence[int]]) -> None:
        """A new model's classes; everything visible again."""
        self._names = tuple(names)
        self._colours = tuple((int(c[0]), int(c[1]), int(c[2])) for c in colours)
        self._shares = None
        self.hidden = frozenset()
        self._rebuild()
        self.hidden_changed.emit(self.hidden)

    def set_labels(self, labels: np.ndarray | None) -> None:
        """Show each class's share of the (H, W) labels next to its name (None clears the shares)."""
        if labels is None or labels.size == 0:
            self._shares = None
        else:
            counts = np.bincount(labels.ravel(), minlength=len(self._names))[: len(self._names)]
            self._shares = counts / labels.size
        self._rebuild()

    def set_hidden(self, hidden: frozenset[int]) -> None:
        self.hidden = frozenset(hidden)
        self._rebuild()
        self.hidden_changed.emit(self.hidden)

    def _toggle(self, item: QListWidgetItem) -> None:
        index = int(item.data(CLASS_ROLE))
        self.set_hidden(self.hidden - {index} if index in self.hidden else self.hidden | {index})

    def _rebuild(self) -> None:
        self.clear()
        for index, (name, colour) in enumerate(zip(self._names, self._colours)):
            hidden = index in self.hidden
            share = None if self._shares is None else f"{100 * self._shares[index]:.1f} %"
            text = name if share is None else f"{name}  —  {share}"
            item = QListWidgetItem(_swatch(colour, hidden), text)
            item.setData(CLASS_ROLE, index)
            item.setData(NAME_ROLE, name)
            item.setData(SHARE_ROLE, share)
            item.setToolTip(f"{text}\nClick to {'show' if hidden else 'hide'} it in the overlay")
            font = item.font()
            font.setStrikeOut(hidden)
            item.setFont(font)
            if hidden:
                item.setForeground(QColor(120, 124, 132))
            self.addItem(item)


class OverlayPanel(QWidget):
    """Overlay toggle, opacity slider (0-100 %) and the class legend."""

    opacity_changed = Signal(float)  # 0..1
    overlay_toggled = Signal(bool)

    def __init__(self) -> None:
        super().__init__()
        self.show_overlay = QCheckBox("Show overlay")
        self.show_overlay.setChecked(True)
        self.show_overlay.toggled.connect(self.overlay_toggled)
        self.opacity = QSlider(Qt.Orientation.Horizontal)
        self.opacity.setRange(0, 100)
        self.opacity.setValue(50)
        self.opacity.setToolTip("Overlay opacity")
        self.opacity_value = QLabel("50 %")
        self.opacity_value.setMinimumWidth(40)
        self.opacity.valueChanged.connect(self._on_opacity)
        self.legend = ClassLegend()
        row = QHBoxLayout()
        row.addWidget(QLabel("Opacity"))
        row.addWidget(self.opacity, 1)
        row.addWidget(self.opacity_value)
        layout = QVBoxLayout(self)
        layout.addWidget(self.show_overlay)
        layout.addLayout(row)
        layout.addWidget(QLabel("Classes"))
        layout.addWidget(self.legend, 1)

    def set_opacity(self, opacity: float) -> None:
        self.opacity.setValue(round(100 * min(max(opacity, 0.0), 1.0)))

    def _on_opacity(self, value: int) -> None:
        self.opacity_value.setText(f"{value} %")
        self.opacity_changed.emit(value / 100)
