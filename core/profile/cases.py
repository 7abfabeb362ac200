"""The lab's benchmark cases, each run in its own subprocess by `runner.run_case_cancellable`.

Every case builds the model from a ModelSpec dict, makes a (1, C, size, size) input before the
probe starts (so the input is not counted, the output is), and returns peak bytes and seconds.
"""
from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ..benchmarks.measure import Probe, median_seconds
from ..engine import compile as compile_plan
from ..engine.tile_plan import BudgetTooSmallError
from ..io.images import ImageData
from ..memory import format_bytes
from ..predict import InferenceOptions, Segmenter
from ..train.lean import enable_activation_checkpointing
from .eager import eager_profile
from .engine import engine_profile, lower_bounds
from .model_spec import ModelSpec

GRAD_MODES = ("grad", "no_grad", "inference_mode")
TILED_BUDGET_SHARE = 4  # the tiled run's budget: a quarter of the engine's whole-image estimate
RAISES = 8  # tries at raising that budget to the least the smallest tile needs, which grows a little with it


def _measured(probe: Probe, run: Callable[[], object], repeats: int) -> dict[str, Any]:
    """Peak of one run after `probe.start()`, and the median time of it and `repeats - 1` more runs."""
    probe.start()
    start = time.perf_counter()
    run()
    first = time.perf_counter() - start
    peak = probe.peak_bytes()
    seconds = [first] + [median_seconds(run, repeats=1, warmup=0) for _ in range(repeats - 1)]
    return {"peak_bytes": peak, "seconds": statistics.median(seconds)}


def _setup(spec: dict[str, Any], size: int, device: str) -> tuple[Any, torch.Tensor]:
    loaded = ModelSpec.from_dict(spec).load()
    dev = torch.device(device)
    torch.manual_seed(0)
    x = torch.randn(1, loaded.info.config.in_channels, size, size, device=dev)
    return loaded, x


def _grad_context(grad_mode: str) -> contextlib.AbstractContextManager:
    if grad_mode not in GRAD_MODES:
        raise ValueError(f"unknown grad mode {grad_mode!r}; valid: {', '.join(GRAD_MODES)}")
    if grad_mode == "no_grad":
        return torch.no_grad()
    if grad_mode == "inference_mode":
        return torch.inference_mode()
    return torch.enable_grad()


def eager_case(probe: Probe, spec: dict[str, Any], size: int, grad_mode: str, repeats: int,
               device: str = "cpu") -> dict[str, Any]:
    """Eval-mode forward (plain PyTorch) under grad / no_grad / inference_mode."""
    loaded, x = _setup(spec, size, device)
    model = loaded.model.to(x.device).eval()
    with _grad_context(grad_mode):
        model(x)  # warm-up
        return _measured(probe, lambda: model(x), repeats)


def train_case(probe: Probe, spec: dict[str, Any], size: int, checkpointing: bool, repeats: int,
               device: str = "cpu") -> dict[str, Any]:
    """One training step (forward, cross-entropy, backward, AdamW), batch 1; peak above weights and
    optimiser state (allocated by a warm-up step)."""
    loaded, x = _setup(spec, size, device)
    model = loaded.model.to(x.device).train()
    if checkpointing:
        enable_activation_checkpointing(model)
    for parameter in model.parameters():
        parameter.requires_grad_(True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    target = torch.randint(0, loaded.info.config.num_classes, (1, size, size), device=x.device)

    def step() -> None:
        loss = F.cross_entropy(model(x), target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    step()  # warm-up: allocates the optimiser state, which the baseline then includes
    optimizer.zero_grad(set_to_none=True)
    return _measured(probe, step, repeats)


def engine_case(probe: Probe, spec: dict[str, Any], size: int, precision: str, repeats: int,
                device: str = "cpu") -> dict[str, Any]:
    """The engine's plan, whole image, labels out; also its own accounted peak."""
    loaded, x = _setup(spec, size, device)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    plan = compile_plan(loaded.model, device=x.device, dtype=dtype)
    plan.run(x)
    result = _measured(probe, lambda: plan.run(x), repeats)
    result["accounted_bytes"] = plan.last_stats.peak_bytes if plan.last_stats else 0
    return result


def engine_tiled_case(probe: Probe, spec: dict[str, Any], size: int, repeats: int,
                      device: str = "cpu") -> dict[str, Any]:
    """Segmenter (engine, fast tiles: a 2-stride halo) on a uint8 image under a budget of a quarter of the
    whole-image estimate, raised to the least its smallest tile needs where a quarter is less; its peak includes
    the image's conversion and the label array. (Exact tiles carry a 320 px halo for MobileUNet, which at
    1024 px costs more than the whole image.)"""
    loaded, x = _setup(spec, size, device)
    whole = compile_plan(loaded.model, device=x.device).estimate_peak(tuple(x.shape))
    rng = np.random.default_rng(0)
    channels = loaded.info.config.in_channels
    pixels = rng.integers(0, 255, (size, size, 3) if channels == 3 else (size, size), dtype=np.uint8)
    image = ImageData(pixels)
    quarter = budget = max(1, whole // TILED_BUDGET_SHARE)
    for _ in range(RAISES):
        tried = budget
        segmenter = Segmenter(loaded, InferenceOptions(device=device, engine="lean", tiling="fast",
                                                       memory_budget=budget))
        try:
            notes = segmenter.segment(image).notes  # warm-up; says how it tiled
            break
        except BudgetTooSmallError as err:  # the engine plans its bands for the budget: the least moves with it
            if not err.least_bytes:
                raise
            budget = max(err.least_bytes, budget + budget // 8)
    else:
        raise BudgetTooSmallError(f"no tiled run fits within {format_bytes(tried)} after {RAISES} raises of the "
                                  f"budget from a quarter of the whole image's estimate, {format_bytes(quarter)}")
    if budget != quarter:
        notes = [f"budget raised to {format_bytes(budget)} for the smallest tile (a quarter of the whole image's "
                 f"estimate, {format_bytes(quarter)}, is too little)", *notes]
    return {**_measured(probe, lambda: segmenter.segment(image), repeats), "budget_bytes": budget, "notes": notes}


def profile_case(probe: Probe, spec: dict[str, Any], size: int, device: str = "cpu") -> dict[str, Any]:
    """The eager and engine (fp32) profiles and the lower bounds, as dicts."""
    loaded, x = _setup(spec, size, device)
    start = time.perf_counter()
    eager = eager_profile(loaded.model, x)
    engine = engine_profile(compile_plan(loaded.model, device=x.device), x)
    bounds = lower_bounds(loaded.model, tuple(x.shape))
    return {"peak_bytes": 0, "seconds": time.perf_counter() - start, "eager": eager.to_dict(),
            "engine": engine.to_dict(), "bounds": bounds.to_dict()}
