"""Edit a graph model's card (class names, colours, mean/std, channel order) and save it as NAME.json beside the
model file; the window then reopens the model so the card is checked against the graph again."""
from __future__ import annotations

import html
import json
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QColorDialog,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from leanseg.core.model.card import (
    CHANNEL_ORDERS,
    CardError,
    ModelCard,
    card_from_json,
    card_path_for,
    default_input,
    write_card,
)
from leanseg.core.model.checkpoint import ModelInfo


class CardEditor(QDialog):
    """A table of classes (name, colour: double-click the colour to pick one), mean, std and channel order.
    Save writes the card (`saved(Path)` with the card's path); a value the card refuses is shown in the dialog."""

    saved = Signal(object)  # Path of the card written

    def __init__(self, parent: QWidget | None, model_path: Path, card: ModelCard,
                 names: tuple[str, ...], colours: tuple[tuple[int, int, int], ...]) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Model card — {model_path.name}")
        self.model_path, self.card = model_path, card
        self.table = QTableWidget(len(names), 2)
        self.table.setHorizontalHeaderLabels(["class name", "colour"])
        self.table.setVerticalHeaderLabels([str(index) for index in range(len(names))])  # the class indices
        self.table.horizontalHeader().setStretchLastSection(True)
        for row, (name, colour) in enumerate(zip(names, colours)):
            self.table.setItem(row, 0, QTableWidgetItem(name))
            self.table.setItem(row, 1, self._colour_item(colour))
        self.table.cellDoubleClicked.connect(self._pick_colour)
        self.mean = QLineEdit(", ".join(f"{v:g}" for v in card.mean))
        self.std = QLineEdit(", ".join(f"{v:g}" for v in card.std))
        self.channel_order = QComboBox()
        self.channel_order.addItems(list(CHANNEL_ORDERS))
        self.channel_order.setCurrentText(card.channel_order)
        self.problem = QLabel("")
        self.problem.setObjectName("cardProblem")
        self.problem.setWordWrap(True)
        form = QFormLayout()
        form.addRow("Mean (of 0..1 pixels)", self.mean)
        form.addRow("Std", self.std)
        form.addRow("Channel order", self.channel_order)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.save)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel(f"Saved as <tt>{card_path_for(model_path)}</tt>; the model is then reopened."))
        layout.addWidget(self.table, 1)
        layout.addLayout(form)
        layout.addWidget(self.problem)
        layout.addWidget(buttons)
        self.resize(460, 520)

    @staticmethod
    def _colour_item(colour: tuple[int, int, int]) -> QTableWidgetItem:
        item = QTableWidgetItem(", ".join(str(c) for c in colour))
        item.setBackground(QColor(*colour))
        item.setForeground(QColor(0, 0, 0) if sum(colour) > 380 else QColor(255, 255, 255))
        return item

    def _pick_colour(self, row: int, column: int) -> None:
        if column != 1:
            return
        chosen = QColorDialog.getColor(QColor(*self.colour_at(row)), self, "Class colour")
        if chosen.isValid():
            self.set_colour(row, (chosen.red(), chosen.green(), chosen.blue()))

    def colour_at(self, row: int) -> tuple[int, int, int]:
        parts = [int(v) for v in self._cell(row, 1).replace(",", " ").split()]
        if len(parts) != 3:
            raise ValueError(f"class {row}: a colour is three numbers r, g, b")
        return parts[0], parts[1], parts[2]

    def _cell(self, row: int, column: int) -> str:
        item = self.table.item(row, column)
        return item.text() if item is not None else ""

    def set_colour(self, row: int, colour: tuple[int, int, int]) -> None:
        self.table.setItem(row, 1, self._colour_item(colour))

    def set_name(self, row: int, name: str) -> None:
        self.table.setItem(row, 0, QTableWidgetItem(name))

    def edited_card(self) -> ModelCard:
        """The card as edited; CardError or ValueError naming the bad value."""
        rows = range(self.table.rowCount())
        names = tuple(self._cell(row, 0).strip() or f"class {row}" for row in rows)
        colours = tuple(self.colour_at(row) for row in rows)
        mean = tuple(float(v) for v in self.mean.text().replace(",", " ").split())
        std = tuple(float(v) for v in self.std.text().replace(",", " ").split())
        return replace(self.card, classes=names, colours=colours, mean=mean, std=std,
                       channel_order=self.channel_order.currentText(), source=str(card_path_for(self.model_path)))

    def save(self) -> None:
        try:
            card = self.edited_card()
            path = write_card(card, card_path_for(self.model_path))
        except (CardError, ValueError, OSError) as err:
            self.problem.setText(f"Not saved: {err}")
            return
        self.saved.emit(path)
        self.accept()


def card_notice(path: Path | None, info: ModelInfo) -> str | None:
    """The banner's rich text for a graph model opened without a card (what was assumed), else None."""
    provenance = info.provenance
    if path is None or provenance.get("format") not in ("pt2", "onnx") or provenance.get("card") != "defaults":
        return None
    return (f"<b>No card beside {html.escape(path.name)}</b> (looked for {html.escape(card_path_for(path).name)}): "
            f"default class names, a fixed palette, {default_input(info.config.in_channels)}. Edit the card to name "
            "the classes.")


def card_editor_for(parent: QWidget, path: Path | None, info: ModelInfo) -> CardEditor:
    """The editor for the loaded model's card; ValueError saying why a model has no card to edit here."""
    provenance = info.provenance
    if path is None or provenance.get("format") not in ("pt2", "onnx"):
        kind = provenance.get("format", "leanseg")
        how = ("its card is inside the bundle: edit NAME.json and run `leanseg import-model SRC --card NAME.json` "
               "again" if kind == "bundle" else "a leanseg checkpoint carries its class names and colours")
        raise ValueError(f"{path.name if path else 'this model'}: {how}")
    card = card_from_json(json.loads(provenance.get("card_json") or '{"card_version": 1}'), str(path))
    return CardEditor(parent, path, card, info.class_names, info.class_colours)
