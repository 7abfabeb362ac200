"""A folder that refuses new files, for the tests of output errors."""
from __future__ import annotations

import os
import shutil
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


def as_a_plain_user() -> list[str]:
    """A command prefix under which file permissions hold (root reads any file): none for a user who is not
    root; for root, `setpriv` without the capabilities that override them; or skip."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: file permissions cannot be made to hold")
    return ["setpriv", "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search,-fowner"]
