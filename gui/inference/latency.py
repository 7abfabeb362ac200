"""Process settings that keep the GUI thread on time while inference runs on the worker thread.

- Inference uses all cores but one, which stays with the GUI thread ($LEANSEG_THREADS overrides).
- The GIL is handed over every 1 ms instead of 5 ms, so the GUI thread waits less for it.
- Objects alive after start-up (torch, Qt, the model: ~230k) are moved out of the cyclic garbage collector's
  reach with `gc.freeze()`: a full collection over them costs ~140 ms of CPU, which on a busy machine turned
  into GUI pauses of most of a second. Each freeze first thaws the last one's objects, so a model that was
  replaced (frozen while it was loaded) is collected, not kept for the life of the process.
"""
from __future__ import annotations

import gc
import os
import sys

import torch

GIL_SWITCH_INTERVAL_S = 0.001  # Python's default is 0.005


def inference_threads() -> int:
    """CPU threads for inference: $LEANSEG_THREADS, else all cores but one."""
    configured = os.environ.get("LEANSEG_THREADS", "")
    if configured.isdigit() and int(configured) > 0:
        return int(configured)
    return max(1, (os.cpu_count() or 2) - 1)


def configure_process() -> None:
    """Thread count and GIL switch interval for an interactive process (call once, from the GUI thread)."""
    torch.set_num_threads(inference_threads())
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)


def freeze_long_lived_objects() -> None:
    """Collect once, then exclude every object alive now from future cyclic collections. Objects an earlier call
    froze are thawed first and collected if they are garbage now (the previous model)."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()
