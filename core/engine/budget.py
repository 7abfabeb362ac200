"""The memory budget: choose band sizes so the plan's predicted peak fits."""
from __future__ import annotations

from torch import fx

from .bands import BandedInvertedResidual
from .chain import BandedChain
from .head import LabelsHead

MIN_BAND_BYTES = 64 * 2**10


def band_modules(graph_module: fx.GraphModule) -> list[BandedInvertedResidual | LabelsHead | BandedChain]:
    return [m for m in graph_module.modules() if isinstance(m, (BandedInvertedResidual, LabelsHead, BandedChain))]


def apply_memory_budget(graph_module: fx.GraphModule, memory_budget: int) -> str:
    """Cap every band's temporaries at 1/16 of the budget (at least 64 KB); returns a note.

    A budget under 16x a band's default bytes also lifts the minimum rows per band, so that bands
    shrink to fit it. Whether the whole image fits is for the tiler to decide, with `Plan.estimate_peak`.
    """
    band_bytes = max(MIN_BAND_BYTES, memory_budget // 16)
    for module in band_modules(graph_module):
        if band_bytes < module.band_bytes:
            module.band_bytes = band_bytes
            if isinstance(module, (BandedInvertedResidual, BandedChain)):
                module.min_rows = 1
    return f"memory budget {memory_budget} B: band temporaries capped at {band_bytes} B"
