"""Fixtures and helpers for GUI tests: offscreen Qt, a tiny checkpoint, images written on the fly, a window on INI
settings, the app's style, a drop, a long Last-run text, an axis's tick labels."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from collections.abc import Callable, Iterator  # noqa: E402
from pathlib import Path  # noqa: E402

import cv2  # noqa: E402
import numpy as np  # noqa: E402
import pyqtgraph as pg  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from PySide6.QtCore import QMimeData, QPointF, Qt, QTimer, QUrl  # noqa: E402
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QImage, QPainter  # noqa: E402
from PySide6.QtWidgets import QApplication, QMessageBox  # noqa: E402

from leanseg.core.model import MobileUNet, MobileUNetConfig  # noqa: E402
from leanseg.core.model.checkpoint import default_info, save_checkpoint  # noqa: E402
from leanseg.gui.style import apply_style  # noqa: E402

TINY = MobileUNetConfig(num_classes=4, width=0.25, decoder_channels=(16, 16, 8, 8), decoder_expansion=2)
JOB_TIMEOUT_MS = 60_000  # generous: the test machine is shared and busy
LONG_RUN = (  # a Last-run text as long as the shipped model's
    "Last run: 0.26 s · job peak process RSS 613.4 MB (+56.6 MB) · cpu\nwhole image 480x360 in one pass, "
    "estimated tensor peak 27.6 MB with 691.2 KB of image and outputs within budget 8.6 GB")


@pytest.fixture(scope="session")
def gui_tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    model = MobileUNet(TINY).eval()
    with torch.no_grad():  # a bias towards several classes, so the labels are not all one class
        head = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)][-1]
        head.bias.copy_(torch.tensor([0.0, 0.1, -0.1, 0.05]))
    return save_checkpoint(tmp_path_factory.mktemp("models") / "tiny.safetensors", model, default_info(TINY))


def write_image(path: Path, height: int, width: int, seed: int = 0) -> Path:
    """A smooth RGB test image (gradients plus noise) written as PNG; returns `path`."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    rgb = np.stack([x * 255 // max(width - 1, 1), y * 255 // max(height - 1, 1), (x + y) % 256], -1)
    rgb = (rgb + rng.integers(0, 40, rgb.shape)).clip(0, 255).astype(np.uint8)
    cv2.imwrite(str(path), cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
    return path


@pytest.fixture
def small_image(tmp_path: Path) -> Path:
    return write_image(tmp_path / "small.png", 72, 96)


@pytest.fixture
def app_style(qapp: QApplication) -> Iterator[None]:
    """The app's own style for one test (its widths are what a user sees), the test default's afterwards."""
    style, sheet, palette = qapp.style().name(), qapp.styleSheet(), qapp.palette()
    options = {key: pg.getConfigOption(key) for key in ("antialias", "imageAxisOrder", "foreground")}
    apply_style(qapp)
    yield
    qapp.setStyleSheet(sheet)
    qapp.setPalette(palette)
    qapp.setStyle(style)
    pg.setConfigOptions(**options)


@pytest.fixture
def settings_path(tmp_path: Path) -> Path:
    return tmp_path / "settings.ini"


@pytest.fixture
def no_default_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the assets folder at an empty one, so no default model is installed."""
    assets = tmp_path / "assets"
    (assets / "models").mkdir(parents=True)
    monkeypatch.setenv("LEANSEG_ASSETS", str(assets))
    return assets


@pytest.fixture
def make_window(qtbot, settings_path: Path, no_default_model: Path) -> Iterator[Callable[..., object]]:  # type: ignore[no-untyped-def]
    """Build a shown MainWindow on INI settings; with `model`, wait until the worker has loaded it."""
    from leanseg.gui.main_window.settings import AppSettings
    from leanseg.gui.main_window.window import MainWindow

    def make(model: Path | None = None) -> MainWindow:
        window = MainWindow(settings=AppSettings(settings_path), model_path=None)
        qtbot.addWidget(window)
        window.show()
        if model is not None:
            with qtbot.waitSignal(window.model_changed, timeout=JOB_TIMEOUT_MS):
                window.open_model(model)
        return window

    yield make


def drop_path(window, path: Path) -> None:  # type: ignore[no-untyped-def]
    """Drag `path` over the middle of `window` and drop it there (the enter event must be accepted)."""
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    pos = QPointF(window.width() / 2, window.height() / 2)
    enter = QDragEnterEvent(pos.toPoint(), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                            Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(window, enter)
    assert enter.isAccepted()
    drop = QDropEvent(pos, Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(window, drop)


def tick_labels(axis) -> list:  # type: ignore[no-untyped-def]
    """The tick labels a pyqtgraph `axis` draws now: (text, rect) pairs."""
    image = QImage(8, 8, QImage.Format.Format_ARGB32)
    painter = QPainter(image)
    try:
        return [(text, rect) for rect, _flags, text in axis.generateDrawSpecs(painter)[2]]
    finally:
        painter.end()


def answer_next_box(button: str, asked: list[str], before_pressing: Callable[[], object] = lambda: None) -> QTimer:
    """Press `button` in the next modal message box once it is open, noting its title, text and informative text
    in `asked`; `before_pressing` runs just before. Looks every 20 ms for 10 s at most: stop the timer it returns
    where no box may open, so it never answers another test's box."""
    timer = QTimer(QApplication.instance())
    timer.setInterval(20)
    looks = iter(range(500))

    def press() -> None:
        box = QApplication.activeModalWidget()
        if not isinstance(box, QMessageBox):
            if next(looks, None) is None:
                timer.stop()
            return
        timer.stop()
        asked.append(f"{box.windowTitle()}\n{box.text()}\n{box.informativeText()}")
        before_pressing()
        next(choice for choice in box.buttons() if choice.text().replace("&", "") == button).click()

    timer.timeout.connect(press)
    timer.start()
    return timer


@pytest.fixture
def image_folder(tmp_path: Path) -> Path:
    """tmp_path/photos with four small images, p0.png .. p3.png: a batch's input."""
    folder = tmp_path / "photos"
    folder.mkdir()
    for i in range(4):
        write_image(folder / f"p{i}.png", 48, 64, seed=i)
    return folder
