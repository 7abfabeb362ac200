"""Tiled against whole-image inference on one picture: logits difference and label agreement.

Exact mode must give identical labels (logits within 1e-4); fast mode is measured at several
halos so the default halo can be chosen from figures.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import torch

from ..engine.tiling import ArraySink, array_source, run_tiles
from ..io.images import ImageData, to_model_input
from ..predict import InferenceOptions, Segmenter
from ..segment_tiled import plan_tiles, runner_for
from .measure import Probe

FAST_HALOS = (64, 128, 192)  # fast-mode halos measured
TIE_LOGITS = 1e-4  # labels may differ only where the top two logits are this close


def agreement_case(probe: Probe, size: int, budget: int, model: str | None, image: str,
                   device: str = "cpu", halos: tuple[int, ...] = FAST_HALOS) -> dict[str, Any]:
    """Rows: exact mode, then fast mode at each halo."""
    from .bench_inputs import load_bench_model, scaled_image

    segmenter = Segmenter(load_bench_model(model), InferenceOptions(device=device, engine="lean",
                                                                    memory_budget=budget))
    pixels = scaled_image(image, size)
    info = segmenter.info

    def to_input(region: np.ndarray) -> np.ndarray:
        return to_model_input(ImageData(region), info.config.in_channels, info.mean, info.std)

    runner = runner_for(segmenter, "logits")
    whole = runner(torch.from_numpy(to_input(pixels))[None])[0].float().cpu().numpy()  # (K, H, W)
    whole_labels = whole.argmax(0)
    top_two = np.sort(whole, axis=0)[-2:]
    decided = (top_two[1] - top_two[0]) > TIE_LOGITS
    del top_two
    held = pixels.nbytes + size * size  # the image and its labels, as a user's run plans its tiles
    exact = plan_tiles(segmenter, size, size, "labels", mode="exact", budget_bytes=budget, held_bytes=held)
    fast = plan_tiles(segmenter, size, size, "labels", mode="fast", budget_bytes=budget, held_bytes=held)
    plans = [exact] + [replace(fast, halo_px=halo) for halo in halos]
    rows = []
    for plan in plans:
        labels = np.zeros((size, size), np.uint8)
        logits = np.zeros_like(whole)
        run_tiles(plan, array_source(pixels, to_input), ArraySink(labels, logits=logits), runner,
                  device=segmenter.device)
        differing = labels != whole_labels
        tile_rows, tile_cols = plan.tile_shape
        rows.append({"mode": plan.mode, "halo px": plan.halo_px, "tiles": plan.grid[0] * plan.grid[1],
                     "tile px": f"{tile_cols}x{tile_rows}", "labels agree": f"{100 * (1 - differing.mean()):.4f}%",
                     "agreement": float(1 - differing.mean()),
                     "max |logit diff|": float(np.abs(logits - whole).max()),
                     "differing labels": int(differing.sum()), "of which decided": int((differing & decided).sum()),
                     "note": plan.describe()})
    return {"size": size, "rows": rows, "peak_bytes": 0}
