"""One writer per output folder: an exclusive lock file, `.leanseg.lock`, held for a whole run.

`fcntl.flock` on the file (the kernel drops it when the holder dies, even by SIGKILL; NFS maps it
to a server-side lock); the file names the holder (pid, host, command) so a refused run can say who
holds the folder. A lock file left by a killed run is taken over with a note. Where the file system
refuses flock, the holder's pid is checked instead (alive on this host: busy). Re-entrant within a
process, so a command can take the lock before building its model and the job take it again.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from ..io.outputs import make_folder
from .manifest import ManifestError

LOCK_NAME = ".leanseg.lock"

# resolved folder -> (fd, depth, the folders this process created for it, deepest first)
_held: dict[Path, tuple[int, int, list[Path]]] = {}
_held_guard = threading.Lock()


class FolderBusyError(ManifestError):
    """Another run holds the output folder; the message names its pid and host."""


class FolderLock:
    """`with FolderLock(out_dir, on_note): ...` holds `out_dir/.leanseg.lock` exclusively (creating out_dir)."""

    def __init__(self, folder: Path, on_note: Callable[[str], None] | None = None) -> None:
        self.folder = folder
        self.on_note = on_note  # called with one line when a stale lock is taken over
        self.path = folder / LOCK_NAME

    def __enter__(self) -> FolderLock:
        key = self.folder.resolve()
        with _held_guard:
            if key in _held:
                fd, depth, created = _held[key]
                _held[key] = (fd, depth + 1, created)
                return self
            created = _missing_folders(self.folder)
            make_folder(self.folder)
            fd = self._acquire()
            _held[key] = (fd, 1, created)
        return self

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None) -> None:
        key = self.folder.resolve()
        with _held_guard:
            fd, depth, created = _held[key]
            if depth > 1:
                _held[key] = (fd, depth - 1, created)
                return
            del _held[key]
            self.path.unlink(missing_ok=True)  # still locked: a waiter that opened it sees a removed file
            os.close(fd)
            for folder in created:  # a run that wrote nothing (refused, a bad model) leaves no empty folder behind
                try:
                    folder.rmdir()
                except OSError:  # not empty: the run wrote there, and so the folders above stay too
                    break

    def _acquire(self) -> int:
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                owner = _read_owner(fd)
                os.close(fd)
                raise FolderBusyError(f"{self.folder} is being written by another leanseg run ({_describe(owner)}); "
                                      "wait for it to end, or choose another output folder") from None
            except OSError as err:
                if err.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                    os.close(fd)
                    raise
                self._check_pid(_read_owner(fd))  # no flock here: fall back on the holder's pid
            if not _same_file(fd, self.path):  # the holder removed it as we opened it: try again
                os.close(fd)
                continue
            previous = _read_owner(fd)
            if previous and previous.get("pid") != os.getpid() and self.on_note is not None:
                self.on_note(f"taking over {self.path}: the run that left it ({_describe(previous)}) has ended")
            _write_owner(fd)
            return fd

    def _check_pid(self, owner: dict[str, Any]) -> None:
        pid = owner.get("pid")
        if owner.get("host") == socket.gethostname() and isinstance(pid, int) and pid != os.getpid() \
                and _alive(pid):
            raise FolderBusyError(f"{self.folder} is being written by another leanseg run ({_describe(owner)}); "
                                  "wait for it to end, or choose another output folder")


def _missing_folders(folder: Path) -> list[Path]:
    """`folder` and those of its parents that do not exist yet, deepest first."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


def _same_file(fd: int, path: Path) -> bool:
    try:
        on_disk = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (on_disk.st_dev, on_disk.st_ino)


def _read_owner(fd: int) -> dict[str, Any]:
    try:
        data = os.pread(fd, 4096, 0)
        owner = json.loads(data.decode("utf-8")) if data.strip() else {}
    except (OSError, ValueError):
        return {}
    return owner if isinstance(owner, dict) else {}


def _write_owner(fd: int) -> None:
    owner = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.strftime("%Y-%m-%d %H:%M:%S"),
             "command": " ".join(sys.argv)[:500]}
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(owner) + "\n").encode(), 0)
    os.fsync(fd)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _describe(owner: dict[str, Any]) -> str:
    if not owner:
        return "pid unknown"
    return f"pid {owner.get('pid', '?')} on {owner.get('host', '?')}, since {owner.get('since', '?')}"
