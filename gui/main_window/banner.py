"""The notice above the viewer: no model loaded (with a button to open one), or what was assumed for a model
without a card (with a button to edit the card)."""
from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton


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
        row = QHBoxLayout(self)
        row.addWidget(self.text, 1)
        row.addWidget(self.edit_card)
        row.addWidget(button)
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
