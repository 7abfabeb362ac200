"""What the app remembers between runs (QSettings): folders, inference choices, overlay, geometry, recent files."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QByteArray, QSettings

MAX_RECENT_FILES = 10


class AppSettings:
    """Typed access to QSettings; `path` gives an INI file (tests), else the platform's user settings."""

    def __init__(self, path: str | Path | None = None) -> None:
        if path is None:
            self._store = QSettings("leanseg", "leanseg")
        else:
            self._store = QSettings(str(path), QSettings.Format.IniFormat)

    def sync(self) -> None:
        self._store.sync()

    # -- plain values -------------------------------------------------------------------------------------
    def text(self, key: str, default: str = "") -> str:
        value = self._store.value(key, default)
        return default if value is None else str(value)

    def set_text(self, key: str, value: str) -> None:
        self._store.setValue(key, value)

    def number(self, key: str, default: float) -> float:
        try:
            return float(self._store.value(key, default))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return default

    def set_number(self, key: str, value: float) -> None:
        self._store.setValue(key, float(value))

    def flag(self, key: str, default: bool) -> bool:
        value = self._store.value(key, default)
        if isinstance(value, str):
            return value.lower() in ("true", "1", "yes")
        return bool(value)

    def set_flag(self, key: str, value: bool) -> None:
        self._store.setValue(key, bool(value))

    def blob(self, key: str) -> QByteArray | None:
        value = self._store.value(key)
        return value if isinstance(value, QByteArray) and not value.isEmpty() else None

    def set_blob(self, key: str, value: QByteArray) -> None:
        self._store.setValue(key, value)

    # -- folders the file dialogs start in ------------------------------------------------------------------
    def last_dir(self, kind: str) -> str:
        """Last folder used for `kind` (image, folder, video, model, save), or the home folder."""
        folder = self.text(f"folders/{kind}")
        return folder if folder and Path(folder).is_dir() else str(Path.home())

    def remember_dir(self, kind: str, path: str | Path) -> None:
        path = Path(path)
        self.set_text(f"folders/{kind}", str(path if path.is_dir() else path.parent))

    # -- recent files -------------------------------------------------------------------------------------
    def recent_files(self) -> list[str]:
        """Most recent first; files that no longer exist are left out."""
        names = [line for line in self.text("recent/files").splitlines() if line]
        return [name for name in names if Path(name).exists()]

    def add_recent_file(self, path: str | Path) -> None:
        name = str(Path(path).resolve())
        names = [name] + [n for n in self.recent_files() if n != name]
        self.set_text("recent/files", "\n".join(names[:MAX_RECENT_FILES]))

    def clear_recent_files(self) -> None:
        self.set_text("recent/files", "")
