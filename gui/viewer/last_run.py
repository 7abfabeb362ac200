"""The inference panel's "Last run" line: the plan of the run in flight and the time its tiles have left, then what
the run came to, wrapped to the panel's width and cut to a few lines at a word, so a long summary never widens the
panel or pushes its controls out of view."""
from __future__ import annotations

from PySide6.QtGui import QFontMetrics, QResizeEvent
from PySide6.QtWidgets import QLabel

from ..text_fit import elide_at_word

LAST_RUN_LINES = 3  # lines a finished run's summary may take in the panel; the whole text is in its tooltip
MIN_TILES_FOR_ESTIMATE = 3  # tiles done before the time left is said: the first warms up, the next two give a rate


def time_left_text(seconds: float) -> str:
    """'a few seconds left', 'about 45 s left', 'about 2 min 10 s left', 'about 1 h 05 min left': rounded as
    far as an estimate from a few tiles deserves."""
    if seconds < 10:
        return "a few seconds left"
    rounded = round(seconds / 5) * 5 if seconds < 60 else round(seconds / 10) * 10  # 5 s steps, then 10 s
    if rounded < 60:
        return f"about {rounded} s left"
    if rounded < 3600:
        minutes, secs = divmod(rounded, 60)
        return f"about {minutes} min {secs} s left" if secs else f"about {minutes} min left"
    hours, minutes = divmod(round(seconds / 60), 60)
    return f"about {hours} h {minutes:02d} min left"


class TileClock:
    """The tiles of the run in flight, from its 'plan' job event to its last 'tile' one, and how long the tiles left
    should take at the rate measured since the first one ended (the first carries the warm-up). Times are
    time.monotonic() seconds, given by the caller."""

    def __init__(self, plan: str, count: int) -> None:
        self.plan = plan  # the tiler's one line: "tiling exact: 9 rows x 15 columns of tiles 160x160 px ..."
        self.count = count  # tiles in all (a tile split after running out of memory adds some)
        self.done = 0
        self._now = 0.0  # when the last tile ended
        self._first_done: tuple[int, float] | None = None  # (tiles done, when): where the measured rate starts

    def tile_done(self, done: int, count: int, now: float) -> None:
        """`done` of `count` tiles have run; a count that changed (tiles split) starts the rate again from here."""
        if self._first_done is None or count != self.count:
            self._first_done = (done, now)
        self.done, self.count, self._now = done, count, now

    def seconds_left(self) -> float | None:
        """Seconds the tiles left should take; None until MIN_TILES_FOR_ESTIMATE tiles have run at one count."""
        if self._first_done is None:
            return None
        first, since = self._first_done  # the rate counts the tiles after this one: first is 1 at the earliest
        if self.done - first < MIN_TILES_FOR_ESTIMATE - 1:
            return None
        return (self._now - since) / (self.done - first) * (self.count - self.done)

    def time_left(self) -> str:
        """'about 1 min 20 s left', or what the estimate waits for."""
        seconds = self.seconds_left()
        if seconds is not None:
            return time_left_text(seconds)
        return "estimating the time left…" if self.count > 1 else ""

    def summary(self) -> str:
        """The panel's text while the run goes on: the time left, then the plan."""
        lines = [line for line in (self.time_left(), self.plan) if line]
        return "This run: " + "\n".join(lines)


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
    """What the run in flight plans (TileClock.summary), then what it came to, wrapped to the panel's width: a
    summary in at most LAST_RUN_LINES lines (cut at a word with "…", the whole text in the tooltip), a failure's
    reason whole."""

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
