"""Text cut to a width at a word, with an ellipsis, so a cut never reads as a typo (the status bar, the
inference panel's Last-run line)."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QFontMetrics

ELLIPSIS = "…"


def elide_at_word(text: str, metrics: QFontMetrics, width_px: int) -> str:
    """`text` if it fits in `width_px`, else its longest start that ends at a word and fits with "…" after it."""
    if width_px <= 0 or metrics.horizontalAdvance(text) <= width_px:
        return text
    kept = metrics.elidedText(text, Qt.TextElideMode.ElideRight, width_px).removesuffix(ELLIPSIS)
    if len(kept) < len(text) and not text[len(kept)].isspace() and " " in kept.strip():
        kept = kept.rstrip().rsplit(" ", 1)[0]  # drop the word the cut went through
    return kept.rstrip(" ,;:·-") + ELLIPSIS
