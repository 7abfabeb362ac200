"""core must work where PySide6 and pyqtgraph are not installed."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BLOCKER = '''
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ("PySide6", "pyqtgraph", "shiboken6") or name.startswith("leanseg.gui"):
            raise ImportError(f"{name} is blocked: core must not import Qt")
sys.meta_path.insert(0, Block())
'''


def test_core_imports_and_segments_without_qt(tmp_path: Path, tiny_checkpoint: Path, rgb_image: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text(BLOCKER)
    script = f'''
import importlib, pkgutil, sys
import leanseg.core
for info in pkgutil.walk_packages(leanseg.core.__path__, "leanseg.core."):
    if not info.name.endswith("__main__"):
        importlib.import_module(info.name)
from leanseg.core.cli import main
sys.exit(main(["segment", {str(rgb_image)!r}, "--out", {str(tmp_path / "out")!r}, "--model", {str(tiny_checkpoint)!r}]))
'''
    import os

    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out" / "input_labels.png").is_file()
