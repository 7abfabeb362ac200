"""A folder that refuses new files, for the tests of output errors."""
from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest


def make_unwritable(folder: Path) -> Callable[[], None]:
    """Make `folder` refuse new files, even to root (immutable flag), or skip; returns the undo."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        return lambda: folder.chmod(0o755)
    if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
        pytest.skip("running as root without chattr +i: cannot make a folder unwritable")
    return lambda: subprocess.run(["chattr", "-i", str(folder)], check=True)
