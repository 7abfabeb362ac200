"""Text cut to a width at a word, with an ellipsis, so a cut never reads as a typo (the status bar, the
inference panel's Last-run line); a label cut in the middle to its width (the Memory lab's model)."""
from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QFontMetrics, QResizeEvent
from PySide6.QtWidgets import QLabel

ELLIPSIS = "…"


def elide_at_word(text: str, metrics: QFontMetrics, width_px: int) -> str:
    """`text` if it fits in `width_px`, else its longest start that ends at a word and fits with "…" after it."""
    if width_px <= 0 or metrics.horizontalAdvance(text) <= width_px:
        return text
    kept = metrics.elidedText(text, Qt.TextElideMode.ElideRight, width_px).removesuffix(ELLIPSIS)
    if len(kept) < len(text) and not text[len(kept)].isspace() and " " in kept.strip():
        kept = kept.rstrip().rsplit(" ", 1)[0]  # drop the word the cut went through
    return kept.rstrip(" ,;:·-") + ELLIPSIS


class ElidedLabel(QLabel):
    """A one-line label that shows as much of its text as its width allows, cut in the middle with "…" (so a path
    keeps its file name), the whole in its tooltip. It asks for its whole width but never holds its window wider
    than `min_px`; `text()` is the whole text."""

    def __init__(self, text: str = "", min_px: int = 120) -> None:
        super().__init__()
        self._text = ""
        self._min_px = min_px  # the narrowest it gets: a few words of the text stay in view
        self.setText(text)

    def text(self) -> str:
        return self._text

    def setText(self, text: str) -> None:
        self._text = text
        self.updateGeometry()
        self._show()

    def sizeHint(self) -> QSize:
        margins = self.contentsMargins()
        width = self.fontMetrics().horizontalAdvance(self._text) + margins.left() + margins.right()
        return QSize(width, super().sizeHint().height())

    def minimumSizeHint(self) -> QSize:
        return QSize(min(self.sizeHint().width(), self._min_px), super().minimumSizeHint().height())

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._show()

    def _show(self) -> None:
        shown = self.fontMetrics().elidedText(self._text, Qt.TextElideMode.ElideMiddle, self.contentsRect().width())
        super().setText(shown)
        self.setToolTip(self._text if shown != self._text else "")
