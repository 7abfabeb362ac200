"""The image viewer: a pyqtgraph view (zoom, pan, locked aspect) with the image and the label overlay as two items."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt, Signal
from PySide6.QtWidgets import QLabel, QVBoxLayout

from ..style import VIEW_BACKGROUND

PLACEHOLDER = "Open an image (Ctrl+O) or drop an image, folder or video here"  # what an empty viewer says
MIN_SHOWN_PX = 48  # a fitted image is drawn at least this tall and wide, stretched if it must be (a 5000x1 strip)


def class_lookup_table(colours: Sequence[Sequence[int]], hidden: frozenset[int] = frozenset()) -> np.ndarray:
    """(256, 4) RGBA uint8: class i -> its colour, opaque unless hidden; indices past the palette transparent."""
    table = np.zeros((256, 4), np.uint8)
    table[: len(colours), :3] = np.asarray(colours, np.uint8).reshape(-1, 3)
    table[: len(colours), 3] = 255
    for index in hidden:
        if 0 <= index < 256:
            table[index, 3] = 0
    return table


class SegmentationViewer(pg.GraphicsView):
    """Shows an (H, W, 3) uint8 image and (H, W) uint8 labels drawn through a class-colour lookup table.

    `overlay_item.image` holds the labels themselves (row-major, H x W); opacity and hidden classes change only
    how they are drawn. `hovered` sends a one-line readout (x, y, pixel, class) as the mouse moves.
    """

    hovered = Signal(str)

    def __init__(self) -> None:
        super().__init__(background=VIEW_BACKGROUND)
        self.setAcceptDrops(False)  # drops go to the main window, which knows what to do with files
        self.view = pg.ViewBox(lockAspect=True, invertY=True, enableMenu=False)
        self.view.setDefaultPadding(0.01)
        self.setCentralItem(self.view)
        self.image_item = pg.ImageItem(axisOrder="row-major")
        self.overlay_item = pg.ImageItem(axisOrder="row-major")
        self.overlay_item.setZValue(1)
        self.view.addItem(self.image_item)
        self.view.addItem(self.overlay_item)
        self.pixels: np.ndarray | None = None  # the shown image, (H, W, 3) uint8
        self.labels: np.ndarray | None = None  # (H, W) uint8, or None before segmentation
        self.class_names: tuple[str, ...] = ()
        self._colours: tuple[tuple[int, int, int], ...] = ()
        self._hidden: frozenset[int] = frozenset()
        self._opacity = 0.5
        self._overlay_on = True
        self.stretch = 1.0  # how much the fitted view stretches the image's short side (1: not at all)
        self.placeholder = self._make_placeholder()
        self.scene().sigMouseMoved.connect(self._on_mouse_moved)

    def _make_placeholder(self) -> QLabel:
        label = QLabel(PLACEHOLDER)
        label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        label.setWordWrap(True)
        label.setStyleSheet("color: #8a8f98; font-size: 15px; background: transparent;")
        layout = QVBoxLayout(self)
        layout.addWidget(label)
        return label

    # -- model -> view --------------------------------------------------------------------------------------
    def set_image(self, rgb: np.ndarray) -> None:
        """Show a new (H, W, 3) uint8 image; the old overlay goes, the view fits the image."""
        self.pixels = rgb
        self.clear_labels()
        self.image_item.setImage(rgb, autoLevels=False, levels=None)  # uint8 RGB, no levels: zero-copy QImage
        self.placeholder.hide()
        self.fit()

    def clear_image(self, message: str) -> None:
        """Show no image, only `message` where it was."""
        self.pixels = None
        self.clear_labels()
        self.image_item.clear()
        self.placeholder.setText(message)
        self.placeholder.show()

    def set_labels(self, labels: np.ndarray, colours: Sequence[Sequence[int]], names: Sequence[str]) -> None:
        """Overlay (H, W) uint8 labels, each class drawn in its colour."""
        if self.pixels is not None and labels.shape != self.pixels.shape[:2]:
            raise ValueError(f"labels {labels.shape} do not match the image {self.pixels.shape[:2]}")
        self.labels = labels
        self._colours = tuple((int(r), int(g), int(b)) for r, g, b in colours)
        self.class_names = tuple(names)
        self.overlay_item.setImage(labels, autoLevels=False, levels=(0, 255), lut=self._lookup_table())
        self._apply_overlay_visibility()

    def clear_labels(self) -> None:
        self.labels = None
        self.overlay_item.clear()

    def set_hidden_classes(self, hidden: frozenset[int]) -> None:
        self._hidden = frozenset(hidden)
        if self.labels is not None:
            self.overlay_item.setLookupTable(self._lookup_table())

    def set_opacity(self, opacity: float) -> None:
        """0 (invisible) .. 1 (opaque class colours)."""
        self._opacity = min(max(float(opacity), 0.0), 1.0)
        self._apply_overlay_visibility()

    def set_overlay_visible(self, visible: bool) -> None:
        self._overlay_on = bool(visible)
        self._apply_overlay_visibility()

    @property
    def overlay_shown(self) -> bool:
        return self._overlay_on and self.labels is not None

    def fit(self) -> None:
        """Show the whole image; a side that would be drawn under MIN_SHOWN_PX is stretched to that size."""
        if self.pixels is None:
            return
        height, width = self.pixels.shape[:2]
        view_w, view_h = max(self.view.width(), 1.0), max(self.view.height(), 1.0)
        scale = min(view_w / width, view_h / height)  # screen px per image px with the aspect kept
        shown = min(width, height) * scale
        self.stretch = MIN_SHOWN_PX / shown if shown < MIN_SHOWN_PX else 1.0
        self.view.setAspectLocked(self.stretch == 1.0)
        if self.stretch == 1.0:
            self.view.autoRange(padding=0.01)
            return
        if width >= height:  # a wide strip: all of its width, its height drawn MIN_SHOWN_PX tall
            span = height * view_h / MIN_SHOWN_PX
            self.view.setRange(xRange=(0, width), yRange=(height / 2 - span / 2, height / 2 + span / 2), padding=0)
        else:
            span = width * view_w / MIN_SHOWN_PX
            self.view.setRange(xRange=(width / 2 - span / 2, width / 2 + span / 2), yRange=(0, height), padding=0)

    def resizeEvent(self, event) -> None:  # type: ignore[no-untyped-def]
        super().resizeEvent(event)
        if getattr(self, "stretch", 1.0) != 1.0:  # a stretched strip keeps its minimum size as the window changes
            self.fit()

    def _lookup_table(self) -> np.ndarray:
        return class_lookup_table(self._colours, self._hidden)

    def _apply_overlay_visibility(self) -> None:
        self.overlay_item.setOpacity(self._opacity)
        self.overlay_item.setVisible(self.overlay_shown)

    # -- view -> readout ------------------------------------------------------------------------------------
    def readout_at(self, x: int, y: int) -> str:
        """'x 12  y 40  RGB 10 20 30  road' for image pixel (x, y), or '' outside the image."""
        if self.pixels is None or not (0 <= y < self.pixels.shape[0] and 0 <= x < self.pixels.shape[1]):
            return ""
        value = self.pixels[y, x]
        text = f"x {x}  y {y}  RGB {' '.join(str(int(v)) for v in np.atleast_1d(value))}"
        if self.labels is not None:
            index = int(self.labels[y, x])
            name = self.class_names[index] if index < len(self.class_names) else f"class {index}"
            text += f"  ·  {name}"
        return text

    def _on_mouse_moved(self, scene_pos: QPointF) -> None:
        point = self.view.mapSceneToView(scene_pos)
        self.hovered.emit(self.readout_at(int(np.floor(point.x())), int(np.floor(point.y()))))
