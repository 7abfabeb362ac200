"""A workaround for reference-count bugs of PySide6 6.12 (shiboken6) on Python 3.11.

PySide6 6.12.0 returns `None` from every void Qt method (`label.setText(...)`, `processEvents()`, pyqtgraph's
`setData`, ...) and `True` from `SignalInstance.emit()` without taking a reference to it. From Python 3.12 on
these singletons are immortal and nothing happens; on 3.11 each call takes one reference from them for good,
and after a few minutes of plotting CPython frees `None` and aborts ("Fatal Python error: none_dealloc").

At import we test for the bug with a few probe calls and, only where it is present, give `None`, `True` and
`False` a reference count so large that no session can exhaust it: what Python 3.12 does for every build.
"""
from __future__ import annotations

import ctypes
import sys

from PySide6.QtCore import QObject, Signal

PINNED_REFERENCES = 1 << 48  # ~2.8e14: at a million leaked references a second, nine years


class _Probe(QObject):
    fired = Signal()


def leaked_references() -> dict[str, int]:
    """References taken for good from None and True by three void calls and three emits."""
    probe = _Probe()
    none_before = sys.getrefcount(None)
    for _ in range(3):
        probe.setObjectName("probe")
    none_lost = none_before - sys.getrefcount(None)
    true_before = sys.getrefcount(True)
    for _ in range(3):
        probe.fired.emit()
    true_lost = true_before - sys.getrefcount(True)
    return {"None": none_lost, "True": true_lost}


def pin_singletons() -> None:
    """Make None, True and False practically immortal, as Python 3.12 does."""
    for singleton in (None, True, False):
        refcount = ctypes.c_ssize_t.from_address(id(singleton))
        refcount.value += PINNED_REFERENCES


def apply_workaround() -> bool:
    """Pin the singletons if this Python can free them and this PySide6 leaks them; returns whether it did."""
    if sys.version_info >= (3, 12) or sys.implementation.name != "cpython":
        return False
    if sys.getrefcount(None) > PINNED_REFERENCES:
        return True  # already done
    lost = leaked_references()
    if lost["None"] < 3 and lost["True"] < 3:
        return False
    pin_singletons()
    return True


SINGLETONS_PINNED = apply_workaround()
