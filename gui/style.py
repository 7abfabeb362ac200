"""The app's look: Fusion with a dark palette, one accent colour, pyqtgraph to match.

A QSpinBox keeps Fusion's frame: a style-sheet border would make Qt draw its up and down buttons without arrows.
A check box keeps Fusion's box and tick, framed by `CheckFrameStyle` (a style-sheet border would drop the tick).
"""
from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QRectF
from PySide6.QtGui import QColor, QPainter, QPalette
from PySide6.QtWidgets import QApplication, QProxyStyle, QStyle, QStyleOption, QWidget

ACCENT = "#3d8bfd"
VIEW_BACKGROUND = "#17181b"  # behind images and plots
PLOT_TEXT = "#c8ccd4"  # titles and labels drawn inside plots
DIM_TEXT = "#9aa0aa"  # secondary text: the Last-run line, placeholders, minor marks
PEAK_COLOUR = "#d9c8a0"  # a pale shade of allocated's: the peak of that curve, not an alarm
CHECK_FRAME = "#7d828c"  # a check box's frame: Fusion's, a shade darker than the window, would not show
CHECK_FRAME_DISABLED = "#4a4e57"
STYLE_SHEET = f"""
QMainWindow, QDockWidget {{ background: #202226; }}
QDockWidget::title {{ background: #2a2d32; padding: 5px 8px; color: #d7dae0; font-weight: 600; }}
QToolBar {{ background: #25272b; border: none; border-bottom: 1px solid #33363c; spacing: 4px; padding: 3px; }}
QStatusBar {{ background: #25272b; color: #b9bec8; border-top: 1px solid #33363c; }}
QLabel#statusField {{ color: #b9bec8; padding: 0 10px; border-left: 1px solid #3a3d44; }}
QLabel#modelName {{ font-weight: 600; color: #e6e8ec; }}
QLabel#lastResult, QLabel#dimLabel {{ color: {DIM_TEXT}; }}
QLabel#lastResult[failed="true"] {{ color: #ff8a80; }}
QLabel#peakLabel {{ color: {PEAK_COLOUR}; font-weight: 600; }}
QFrame#banner {{ background: #4a3b12; border-bottom: 1px solid #7a5f14; }}
QFrame#banner QLabel {{ color: #ffe6a6; padding: 4px; }}
QPushButton {{ background: #30333a; border: 1px solid #444852; border-radius: 4px; padding: 5px 12px; color: #e6e8ec; }}
QPushButton:hover {{ background: #383c44; }}
QPushButton:disabled {{ color: #6b707a; border-color: #383b42; }}
QPushButton#primary {{ background: {ACCENT}; border-color: {ACCENT}; color: white; font-weight: 600; }}
QPushButton#primary:disabled {{ background: #2b4a78; border-color: #2b4a78; color: #9fb3d1; }}
QComboBox {{ background: #2a2d32; border: 1px solid #444852; border-radius: 4px; padding: 3px 6px; }}
QSpinBox {{ background: #2a2d32; min-height: 20px; padding-left: 2px; }}
QProgressBar {{ background: #2a2d32; border: 1px solid #444852; border-radius: 4px; text-align: center;
               color: #d7dae0; height: 16px; }}
QProgressBar::chunk {{ background: {ACCENT}; border-radius: 3px; }}
QListWidget {{ background: #1b1c1f; border: 1px solid #33363c; border-radius: 4px; }}
QListWidget::item {{ padding: 3px; }}
QListWidget::item:hover {{ background: #2a2d32; }}
"""


class CheckFrameStyle(QProxyStyle):
    """Fusion, with each check box's box framed in CHECK_FRAME (the accent while it has the keyboard's focus)."""

    def __init__(self) -> None:
        super().__init__("Fusion")

    def drawPrimitive(self, element: QStyle.PrimitiveElement, option: QStyleOption, painter: QPainter,
                      widget: QWidget | None = None) -> None:
        super().drawPrimitive(element, option, painter, widget)
        if element != QStyle.PrimitiveElement.PE_IndicatorCheckBox:
            return
        state = option.state
        focused = state & QStyle.StateFlag.State_HasFocus and state & QStyle.StateFlag.State_KeyboardFocusChange
        enabled = state & QStyle.StateFlag.State_Enabled
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(QColor(ACCENT if focused else CHECK_FRAME if enabled else CHECK_FRAME_DISABLED))
        painter.drawRoundedRect(QRectF(option.rect).adjusted(0.5, 0.5, -1.5, -1.5), 2, 2)
        painter.restore()


def apply_style(app: QApplication) -> None:
    """Dark Fusion palette and style sheet for the whole app; pyqtgraph antialiased, row-major images."""
    app.setStyle(CheckFrameStyle())
    palette = QPalette()
    colours = {
        QPalette.ColorRole.Window: "#202226",
        QPalette.ColorRole.WindowText: "#d7dae0",
        QPalette.ColorRole.Base: "#1b1c1f",
        QPalette.ColorRole.AlternateBase: "#25272b",
        QPalette.ColorRole.ToolTipBase: "#2a2d32",
        QPalette.ColorRole.ToolTipText: "#e6e8ec",
        QPalette.ColorRole.Text: "#d7dae0",
        QPalette.ColorRole.Button: "#2a2d32",
        QPalette.ColorRole.ButtonText: "#d7dae0",
        QPalette.ColorRole.Highlight: ACCENT,
        QPalette.ColorRole.HighlightedText: "#ffffff",
        QPalette.ColorRole.Link: ACCENT,
        QPalette.ColorRole.PlaceholderText: "#7d828c",
    }
    for role, colour in colours.items():
        palette.setColor(role, QColor(colour))
    palette.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Text, QColor("#6b707a"))
    palette.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.ButtonText, QColor("#6b707a"))
    app.setPalette(palette)
    app.setStyleSheet(STYLE_SHEET)
    pg.setConfigOptions(antialias=True, imageAxisOrder="row-major", foreground="#b9bec8")
