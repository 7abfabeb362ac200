"""The inference panel's "Last run" line: what a run came to, wrapped to the panel's width and cut to a few lines
at a word, so a long summary never widens the panel or pushes its controls out of view."""
from __future__ import annotations

from PySide6.QtGui import QFontMetrics, QResizeEvent
from PySide6.QtWidgets import QLabel

from ..text_fit import elide_at_word

LAST_RUN_LINES = 3  # lines a finished run's summary may take in the panel; the whole text is in its tooltip


def first_lines(text: str, metrics: QFontMetrics, width_px: int, max_lines: int) -> tuple[str, bool]:
    """`text` wrapped at words to `width_px`, and whether it was cut: past `max_lines` lines, the last line kept
    ends at a word with "…"."""
    lines: list[str] = []
    for paragraph in text.split("\n"):
        line = ""
        for word in paragraph.split(" "):
            longer = f"{line} {word}" if line else word
            if line and metrics.horizontalAdvance(longer) > width_px:
                lines.append(line)
                line = word
            else:
                line = longer
        lines.append(line)
    if len(lines) <= max_lines:
        return "\n".join(lines), False
    last = elide_at_word(" ".join(lines[max_lines - 1:]), metrics, width_px)  # the rest, cut to the last line
    return "\n".join(lines[:max_lines - 1] + [last]), True


class LastRunLabel(QLabel):
    """What the last run came to, wrapped to the panel's width: a finished run's summary in at most
    LAST_RUN_LINES lines (cut at a word with "…", the whole text in the tooltip), a failure's reason whole."""

    def __init__(self) -> None:
        super().__init__("")
        self.setWordWrap(True)
        self.setObjectName("lastResult")
        self.whole_text = ""
        self._max_lines: int | None = None  # None: the whole text, however long
        self._tooltip = ""

    def show_text(self, text: str, max_lines: int | None, tooltip: str) -> None:
        self.whole_text, self._max_lines, self._tooltip = text, max_lines, tooltip
        self._fit()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        shown, cut = self.whole_text, False
        width = self.contentsRect().width()
        if self._max_lines is not None and width > 0:
            shown, cut = first_lines(self.whole_text, self.fontMetrics(), width, self._max_lines)
        shown = shown if cut else self.whole_text  # uncut, the label wraps it as it does any text
        if shown != self.text():
            self.setText(shown)
        self.setToolTip("\n\n".join(part for part in (self.whole_text if cut else "", self._tooltip) if part))
