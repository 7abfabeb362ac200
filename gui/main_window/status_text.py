"""The status bar's permanent fields beside the message, which give up their width (cut at a word, whole in their
tooltips) before the message is cut; a cut message is cut again from its whole text whenever the bar is resized."""
from __future__ import annotations

import time

from PySide6.QtCore import QEvent, QObject, QSize, Signal
from PySide6.QtWidgets import QLabel, QStatusBar

from ..text_fit import elide_at_word

FIELD_MIN_PX = 56  # the narrowest a squeezed field gets: a word or two of it stays in view
MESSAGE_MARGIN_PX = 8  # what QStatusBar keeps around its message: 6 px on its left, 2 px before the first field
STATUS_MESSAGE_MARGIN_PX = 16  # before the bar is laid out: its margins and the size grip


def squeeze(widths: list[int], budget_px: int) -> list[int]:
    """The widths, the widest cut down to one common cap, so that together they take at most `budget_px`
    (never below FIELD_MIN_PX, or their own width where that is less)."""
    if sum(widths) <= budget_px:
        return list(widths)
    cap = max(widths)
    while cap > FIELD_MIN_PX and sum(min(width, cap) for width in widths) > budget_px:
        cap -= 1
    return [min(width, cap) for width in widths]


class StatusField(QLabel):
    """A permanent field of the status bar that can be squeezed. `text()` is the whole text the window set; the
    field shows as much of it as `show_within` allows, cut at a word, and then has the whole in its tooltip."""

    changed = Signal()

    def __init__(self) -> None:
        super().__init__("")
        self.setObjectName("statusField")
        self._text = ""
        self._tooltip = ""  # what the window set; a squeezed field adds its whole text above it
        self._width_px = 1 << 20  # the most the field may take

    def text(self) -> str:
        return self._text

    def setText(self, text: str) -> None:
        if text == self._text:  # set on every job event: no relayout for the same text
            return
        self._text = text
        self._show()
        self.changed.emit()

    def setToolTip(self, tooltip: str) -> None:
        self._tooltip = tooltip
        self._show()

    def shown_text(self) -> str:
        """What the field shows: its text, or as much of it as fits, cut at a word with "…"."""
        return super().text()

    def whole_width(self) -> int:
        """Pixels the field takes with its whole text: the text and the style's padding and border."""
        return self.fontMetrics().horizontalAdvance(self._text) + self._chrome_px()

    def show_within(self, width_px: int) -> None:
        if width_px == self._width_px:
            return
        self._width_px = width_px
        self._show()

    def minimumSizeHint(self) -> QSize:
        """A field never holds the bar (and the window) wider than FIELD_MIN_PX: it is squeezed instead."""
        hint = super().minimumSizeHint()
        return QSize(min(hint.width(), FIELD_MIN_PX), hint.height())

    def _chrome_px(self) -> int:
        return super().sizeHint().width() - self.fontMetrics().horizontalAdvance(super().text())

    def _show(self) -> None:
        shown = elide_at_word(self._text, self.fontMetrics(), self._width_px - self._chrome_px())
        super().setText(shown)
        whole = self._text if shown != self._text else ""
        super().setToolTip("\n\n".join(part for part in (whole, self._tooltip) if part))


class StatusFields(QObject):
    """The status bar's permanent fields, by key. While a message is shown, the fields give it the width it needs,
    the widest first, down to FIELD_MIN_PX each; only a message longer than that leaves is cut."""

    def __init__(self, bar: QStatusBar, keys: tuple[str, ...]) -> None:
        super().__init__(bar)
        self.bar = bar
        self.labels = {key: StatusField() for key in keys}
        for label in self.labels.values():
            bar.addPermanentWidget(label)
            label.changed.connect(self.fit)
        self._cut = ("", "", "")  # the cut message: the line shown, its whole text and the bar's tooltip meanwhile
        self._cut_deadline: float | None = None  # time.monotonic() when it times out; None: it stays
        bar.messageChanged.connect(self._on_message)
        bar.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.bar and event.type() == QEvent.Type.Resize:
            self._recut()
            self.fit()
        return False

    def show_cut(self, line: str, tooltip: str, timeout_ms: int = 0) -> None:
        """`line` as the bar's message, cut at a word with "…" to the room the fields leave (and cut again from the
        whole whenever the bar is resized), with `tooltip` on the bar while it shows; gone after `timeout_ms`."""
        shown = elide_at_word(line, self.bar.fontMetrics(), self.message_room())
        self._cut = (shown, line, tooltip)
        self._cut_deadline = time.monotonic() + timeout_ms / 1000 if timeout_ms > 0 else None
        self.bar.showMessage(shown, timeout_ms)
        self.bar.setToolTip(tooltip)

    def _recut(self) -> None:
        """Cut the cut message again for the bar's new width, keeping what is left of its timeout."""
        shown, line, tooltip = self._cut
        if not shown:
            return
        recut = elide_at_word(line, self.bar.fontMetrics(), self.message_room())
        if recut == shown:
            return
        self._cut = (recut, line, tooltip)
        left_ms = 0 if self._cut_deadline is None else max(1, int((self._cut_deadline - time.monotonic()) * 1000))
        self.bar.showMessage(recut, left_ms)

    def _on_message(self, message: str) -> None:
        if self._cut[0] and message != self._cut[0]:  # the cut message is gone: so is its tooltip
            self._cut = ("", "", "")
            self.bar.setToolTip("")
        self.fit()

    def message_room(self) -> int:
        """The most pixels a message can have: the bar less its fields squeezed as far as they go."""
        return self._free_px() - sum(min(label.whole_width(), FIELD_MIN_PX) for label in self._shown())

    def fit(self) -> None:
        """Squeeze the fields just enough for the current message (all of them whole when there is none)."""
        message = self.bar.currentMessage()
        needed = self.bar.fontMetrics().horizontalAdvance(message) if message else 0
        labels = self._shown()
        widths = squeeze([label.whole_width() for label in labels], self._free_px() - needed)
        for label, width in zip(labels, widths):
            label.show_within(width)
        layout = self.bar.layout()
        if layout is not None:
            layout.activate()  # at once: a caller may read where the fields are now

    def _shown(self) -> list[StatusField]:
        return [label for label in self.labels.values() if not label.isHidden()]

    def _free_px(self) -> int:
        """Pixels for the message and the fields together: the bar less its margins, spacing and size grip."""
        labels = [label for label in self._shown() if label.isVisible() and label.width() > 0]
        if not labels:
            return self.bar.width() - STATUS_MESSAGE_MARGIN_PX - MESSAGE_MARGIN_PX
        right_end = max(label.geometry().right() + 1 for label in labels)
        spacing = right_end - min(label.x() for label in labels) - sum(label.width() for label in labels)
        return right_end - spacing - MESSAGE_MARGIN_PX
