"""The notice above the viewer when no model is loaded, with a button to open one."""
from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton


class ModelBanner(QFrame):
    """Hidden until `show_message`; `open_model_requested` when its button is pressed."""

    open_model_requested = Signal()

    def __init__(self) -> None:
        super().__init__()
        self.setObjectName("banner")
        self.text = QLabel()
        self.text.setWordWrap(True)
        button = QPushButton("Open model…")
        button.clicked.connect(self.open_model_requested)
        row = QHBoxLayout(self)
        row.addWidget(self.text, 1)
        row.addWidget(button)
        self.hide()

    def show_message(self, rich_text: str) -> None:
        self.text.setText(rich_text)
        self.show()
