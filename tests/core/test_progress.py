"""CLI progress: a rich bar on a terminal (a real pseudo-terminal here), plain lines in a pipe or a log."""
from __future__ import annotations

import io
import os
import pty
import threading

from leanseg.core.commands.progress import ProgressBar


def test_plain_lines_when_not_a_terminal() -> None:
    stream = io.StringIO()
    bar = ProgressBar(3, label="batch", unit="img", stream=stream)
    for name in ("a.png", "b.png", "c.png"):
        bar.update(1, postfix=name)
    bar.close()
    text = stream.getvalue()
    assert "\r" not in text and "\x1b" not in text  # readable in a log file
    lines = text.splitlines()
    assert lines[-1].startswith("batch 3/3 ") and " img/s ETA " in lines[-1] and lines[-1].endswith("c.png")
    assert len(lines) <= 2  # the first item, then the last: not one line per update


def _drain(fd: int, into: list[bytes]) -> None:
    """Read a pseudo-terminal's leader until its follower is closed (EIO), so the writer never blocks."""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            return
        if not chunk:
            return
        into.append(chunk)


def test_rich_bar_on_a_terminal_with_lines_above_it() -> None:
    leader, follower = pty.openpty()
    chunks: list[bytes] = []
    reader = threading.Thread(target=_drain, args=(leader, chunks), daemon=True)
    reader.start()
    with os.fdopen(follower, "w", encoding="utf-8", closefd=True) as terminal:
        bar = ProgressBar(4, label="frames.mp4", unit="frames", stream=terminal)
        assert bar.interactive
        bar.update(2, postfix="12 ms/frame")
        bar.print_above("a plan line", stream=terminal)
        bar.update(2)
        bar.close()
        terminal.flush()
    reader.join(timeout=30)
    os.close(leader)
    text = b"".join(chunks).decode("utf-8", "replace")
    assert "\x1b[" in text and "━" in text  # a drawn rich bar, not plain lines
    assert "4/4" in text and "frames/s" in text and "a plan line" in text
