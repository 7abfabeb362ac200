"""Run a benchmark case in a child process that can be cancelled (terminated) while it runs.

Same child protocol as `benchmarks.measure.run_case` (the child is `python -m
leanseg.core.benchmarks.measure SPEC`, started with MALLOC_MMAP_THRESHOLD_=65536).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from ..benchmarks import measure
from ..events import JobCancelled

POLL_SECONDS = 0.1
TERMINATE_GRACE_SECONDS = 3.0


def run_case_cancellable(target: str, kwargs: dict[str, Any], *, cancel: threading.Event | None = None,
                         threads: int = 2, timeout: float = 900.0) -> dict[str, Any]:
    """Run `module:function` in a child; its result dict, or {'error': ...}.

    Raises JobCancelled (after terminating the child) when `cancel` is set while it runs.
    """
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", OMP_NUM_THREADS=str(threads))
    spec = json.dumps({"target": target, "kwargs": kwargs, "threads": threads})
    with tempfile.TemporaryFile("w+") as stdout, tempfile.TemporaryFile("w+") as stderr:
        child = subprocess.Popen([sys.executable, "-m", measure.__name__, spec], stdout=stdout, stderr=stderr,
                                 env=env, text=True)
        deadline = time.monotonic() + timeout
        try:
            while child.poll() is None:
                if cancel is not None and cancel.wait(POLL_SECONDS):
                    raise JobCancelled()
                if cancel is None:
                    time.sleep(POLL_SECONDS)
                if time.monotonic() > deadline:
                    return {"error": f"timed out after {timeout:.0f} s"}
        finally:
            if child.poll() is None:
                _stop(child)
        stdout.seek(0)
        stderr.seek(0)
        return _result(child.returncode, stdout.read(), stderr.read())


def _stop(child: subprocess.Popen[str]) -> None:
    child.terminate()
    try:
        child.wait(TERMINATE_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def _result(returncode: int, stdout: str, stderr: str) -> dict[str, Any]:
    for line in stdout.splitlines():
        if line.startswith(measure.RESULT_MARKER):
            result: dict[str, Any] = json.loads(line[len(measure.RESULT_MARKER):])
            return result
    if returncode < 0 or returncode == 137:
        return {"error": f"killed (signal {-returncode if returncode < 0 else 9}; out of memory?)"}
    return {"error": measure.child_error(stderr or stdout, returncode)}
