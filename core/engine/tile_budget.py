"""How much memory a tile may use: the default budget, a share of what is free now (what an eager tile needs:
eager_peak.py)."""
from __future__ import annotations

import psutil
import torch

BUDGET_FRACTION_CPU = 0.5  # default budget: this share of the memory available now
BUDGET_FRACTION_CUDA = 0.8  # ... or of the free CUDA memory
# Under the default budget, no tile's estimated peak goes above this: larger tiles run no faster per pixel
# (a 2048-px strip already beats a whole 1024 image), but each takes minutes with no progress line and no
# chance to stop, and half of RAM is a budget no one chose. An explicit --memory-budget is used as given.
DEFAULT_MAX_TILE_BYTES = 1_000_000_000


def default_budget(device: torch.device) -> int:
    """A share of the memory free now: CUDA free memory, or the host's available memory."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free * BUDGET_FRACTION_CUDA)
    return int(psutil.virtual_memory().available * BUDGET_FRACTION_CPU)
