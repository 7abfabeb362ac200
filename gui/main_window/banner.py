"""The notice above the viewer: no model loaded (with a button to open one), or what was assumed for a model
without a card (with a button to edit the card). Its buttons sit beside the text where that leaves the text room,
else below it, so a narrow window gives the text the whole width instead of a tall thin column."""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QFrame, QGridLayout, QHBoxLayout, QLabel, QPushButton, QWidget

TEXT_BESIDE_PX = 480  # the least width the text keeps with the buttons beside it; narrower, they go below


class ModelBanner(QFrame):
    """Hidden until `show_message` or `show_card_notice`; `open_model_requested` / `edit_card_requested` when
    their buttons are pressed."""

    open_model_requested = Signal()
    edit_card_requested = Signal()

    def __init__(self) -> None:
        super().__init__()
        self.setObjectName("banner")
        self.text = QLabel()
        self.text.setWordWrap(True)
        self.edit_card = QPushButton("Edit card…")
        self.edit_card.clicked.connect(self.edit_card_requested)
        button = QPushButton("Open model…")
        button.clicked.connect(self.open_model_requested)
        self.buttons = QWidget()
        row = QHBoxLayout(self.buttons)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.edit_card)
        row.addWidget(button)
        self.grid = QGridLayout(self)
        self.grid.addWidget(self.text, 0, 0)
        self.grid.setColumnStretch(0, 1)
        self.buttons_beside: bool | None = None  # where the buttons are: beside the text, or below it
        self._place_buttons(beside=True)
        self.hide()

    def show_message(self, rich_text: str) -> None:
        self.text.setText(rich_text)
        self.edit_card.hide()
        self.show()

    def show_card_notice(self, rich_text: str) -> None:
        """What the app assumed about the loaded model, with the Edit card… button."""
        self.text.setText(rich_text)
        self.edit_card.show()
        self.show()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        margins = self.grid.contentsMargins()
        text_room = (event.size().width() - margins.left() - margins.right() - self.grid.horizontalSpacing()
                     - self.buttons.sizeHint().width())
        self._place_buttons(beside=text_room >= TEXT_BESIDE_PX)

    def _place_buttons(self, beside: bool) -> None:
        if beside == self.buttons_beside:
            return
        self.grid.removeWidget(self.buttons)
        if beside:
            self.grid.addWidget(self.buttons, 0, 1, Qt.AlignmentFlag.AlignVCenter)
        else:
            self.grid.addWidget(self.buttons, 1, 0, Qt.AlignmentFlag.AlignRight)
        self.buttons_beside = beside
