"""An ONNX Runtime CPU session for the benchmarks, with its memory arena off where the peak is measured.

ORT keeps what a run allocated in its arena for the next run, so after the warm-up runs its whole working set sits
in the baseline and the peak above baseline reads as almost nothing (a 256 px zoo model: 0.6 MB, where one of its
feature maps is 2 MB). In a process that maps its allocations (MALLOC_MMAP_THRESHOLD_, how the benchmarks measure
peaks) the arena is turned off, so each run's buffers are allocated and returned like PyTorch's and its peak counts
them. The times measured in those processes (`leanseg bench`'s default table) are mapped-malloc times for every
configuration alike, ORT's allocations included; the latency figures the docs quote come from processes with glibc's
defaults (`--malloc user`, `bench --zoo`'s latency runs), where ORT keeps its arena as a user's process does.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

PEAK_ENV = "MALLOC_MMAP_THRESHOLD_"  # set in the processes that measure peaks


def measures_peak() -> bool:
    """Whether this process measures peaks (its allocations are mapped, so RSS follows live bytes)."""
    return PEAK_ENV in os.environ


def ort_session(path: Path, threads: int) -> Any:
    """An InferenceSession of `path` on the CPU provider with `threads` intra-op threads; arena off in a
    peak-measuring process (see the module's note)."""
    import onnxruntime as ort  # the optional `bench` extra

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.enable_cpu_mem_arena = not measures_peak()
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
