"""leanseg desktop app (PySide6 + pyqtgraph)."""
