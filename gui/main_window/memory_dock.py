"""The memory dock's height as the window is resized: the height it was given (MEMORY_HEIGHT, or where the user
dragged it), less where a low window needs the room for the Inference panel's Segment button and progress bar (and
so for the image beside it); it gets that height back when the window grows again. Where that leaves less than a
useful plot, the plot folds away and the dock keeps the figures line alone; a dock floated from such a squeeze gets
its given height back.

Qt's own layout keeps a bottom dock's height when the window grows, so a dock squeezed by a low window would stay
squeezed; this keeps what the dock should have apart from what it has now.
"""
from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QEvent, QObject, QPoint, Qt, QTimer
from PySide6.QtGui import QMouseEvent, QResizeEvent
from PySide6.QtWidgets import QApplication, QDockWidget, QMainWindow, QScrollArea, QWidget

from ..memory.panel import MemoryPanel

MEMORY_HEIGHT = 240  # px: the memory dock's height in a new window
MEMORY_SHARE = 0.3  # the most of the window's height the dock takes when no Inference panel is docked at a side
PANEL_MARGIN_PX = 12  # kept below the Inference panel's progress bar, so it does not sit on the panel's edge
SIDE_AREAS = (Qt.DockWidgetArea.LeftDockWidgetArea, Qt.DockWidgetArea.RightDockWidgetArea)


class MemoryDockHeight(QObject):
    """Fits `dock` (the memory panel's, at the bottom) to `window` when the window is shown or resized, and when
    `dock`, `inference` or one of `others` (the window's other docks) is shown, closed, moved or floated.

    `inference` is the Inference dock (its widget a scroll area) and `last_kept` the widget down to which its panel
    must stay in view (the progress bar under Segment). Only the user's drag of the separator above the dock (a
    press on the window itself, where its separators are) changes the height it is given; a layout's change does not.
    Where `dock`'s widget is a MemoryPanel, a room below its least useful plot folds the plot away.
    """

    def __init__(self, window: QMainWindow, dock: QDockWidget, inference: QDockWidget, last_kept: QWidget,
                 others: Sequence[QDockWidget] = ()) -> None:
        super().__init__(window)
        self.window, self.dock, self.inference, self.last_kept = window, dock, inference, last_kept
        self.wanted = MEMORY_HEIGHT  # the height given to the dock: a new window's, the user's (dragged or saved)
        self._window_height = -1  # the window's height when the dock was last fitted; -1: not shown yet
        self._separator_held = False  # the left button went down on the window's own area (a separator), not up yet
        self._refit_pending = False  # a refit is queued for after the layout has placed the docks
        window.installEventFilter(self)
        dock.installEventFilter(self)
        for each in (dock, inference, *others):
            each.visibilityChanged.connect(self._refit_soon)
            each.dockLocationChanged.connect(self._refit_soon)
            each.topLevelChanged.connect(self._refit_soon)
        dock.topLevelChanged.connect(self._floated)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.window and event.type() == QEvent.Type.Show and self._window_height < 0:
            self._fit(first=True)  # shown for the first time: its docks are laid out now, not at its first resize
        elif watched is self.window and event.type() == QEvent.Type.Resize and self._window_height >= 0:
            self._fit(first=False)  # the window's layout has placed the docks already
        elif watched is self.window and isinstance(event, QMouseEvent):
            self._follow_separator_press(event)
        elif (watched is self.dock and isinstance(event, QResizeEvent) and self._dragging_separator()
                and self._docked() and event.oldSize().height() != event.size().height()):
            self.wanted = event.size().height()  # the user dragged the separator
        return False

    def _follow_separator_press(self, event: QMouseEvent) -> None:
        """Note a left press on the window's own area, where QMainWindow has its separators (a press on one of its
        widgets, a dock's title bar included, does not count), until its release."""
        if event.button() != Qt.MouseButton.LeftButton:
            return
        if event.type() == QEvent.Type.MouseButtonPress:
            self._separator_held = self.window.childAt(event.position().toPoint()) is None
        elif event.type() == QEvent.Type.MouseButtonRelease:
            self._separator_held = False

    def _dragging_separator(self) -> bool:
        return self._separator_held and bool(QApplication.mouseButtons() & Qt.MouseButton.LeftButton)

    def _refit_soon(self) -> None:
        """Fit the dock as a window just shown does, once the window's layout has placed the docks after a dock was
        shown, closed or moved (the docks' signals come before that: the fit is queued behind the layout's)."""
        if not self._refit_pending:
            self._refit_pending = True
            QTimer.singleShot(0, self, self._refit)

    def _refit(self) -> None:
        self._refit_pending = False
        if self._window_height >= 0:  # before the window is first shown, its Show fits the dock
            self._fit(first=True)

    def _fit(self, first: bool) -> None:
        """A window just shown (or a dock just shown, closed or moved) sets the dock to `wanted` as far as `room()`
        allows; then a lower window only lowers it (down to its least height), to fit `room()`, and a higher one
        only raises it, towards `wanted`. A room too low for the panel's least useful plot folds the plot away
        and leaves the dock its figures line alone (the panel unfolds it when the dock is high enough again)."""
        old_height, height = self._window_height, self.window.height()
        self._window_height = height
        if not self._docked() or (height == old_height and not first):
            return
        target = self._useful_height(min(self.wanted, self.room()), may_fold=first or height < old_height)
        target = max(target, self.dock.minimumSizeHint().height())
        lower, higher = target < self.dock.height(), target > self.dock.height()
        if (first and (lower or higher)) or (lower and height < old_height) or (higher and height > old_height):
            self.window.resizeDocks([self.dock], [target], Qt.Orientation.Vertical)

    def _useful_height(self, room: int, may_fold: bool) -> int:
        """`room`, or where that is too low for the memory panel's least useful plot, the height of its figures line
        alone: then the plot folds away when `may_fold` (the panel unfolds it when it is high enough again)."""
        panel = self.dock.widget()
        if not isinstance(panel, MemoryPanel):
            return room
        title = self.dock.minimumSizeHint().height() - panel.minimumSizeHint().height()  # the dock's title bar
        if room >= title + panel.least_height(with_plot=True):
            return room
        if may_fold and not panel.plot.isHidden():
            panel.fold_plot()
            for widget in (panel, self.dock, self.window):  # their layouts learn the dock's new least height now,
                QApplication.sendPostedEvents(widget, QEvent.Type.LayoutRequest)  # or resizeDocks keeps the old one
        return title + panel.least_height(with_plot=False) if panel.plot.isHidden() else room

    def _floated(self, floating: bool) -> None:
        """A dock floated from a low window gets its given height, `wanted`, and so its plot back (not one floated
        while the window's saved state is restored, before it is shown: that keeps the saved size)."""
        if floating and self._window_height >= 0 and self.dock.height() < self.wanted:
            self.dock.resize(self.dock.width(), self.wanted)

    def room(self) -> int:
        """The most the dock may take: what leaves the Inference panel, docked at a side, its controls down to
        `last_kept` (the image beside it then keeps as much height); without that panel, MEMORY_SHARE."""
        panel = self.inference.widget()
        controls = panel.widget() if isinstance(panel, QScrollArea) else None
        if (isinstance(panel, QScrollArea) and controls is not None and self.inference.isVisible()
                and not self.inference.isFloating() and self.window.dockWidgetArea(self.inference) in SIDE_AREAS):
            needed = self.last_kept.mapTo(controls, QPoint(0, self.last_kept.height())).y() + PANEL_MARGIN_PX
            return self.dock.height() + panel.viewport().height() - needed
        return int(self.window.height() * MEMORY_SHARE)

    def _docked(self) -> bool:
        """Whether the dock is shown at the bottom of the window (not closed, floating or moved to a side)."""
        bottom = Qt.DockWidgetArea.BottomDockWidgetArea
        return self.dock.isVisible() and not self.dock.isFloating() and self.window.dockWidgetArea(self.dock) == bottom
