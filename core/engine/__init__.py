"""The memory-lean inference engine: graph capture -> passes -> plan -> executor.

    plan = compile(model, device="cpu")            # once per model, device and dtype
    labels = plan.run(x)                           # (1, C, H, W) -> (1, H, W) uint8
    logits = plan.run(x, output="logits")          # (1, K, H, W) float32
    plan.estimate_peak((1, 3, 1024, 1024))         # bytes, before running
    plan.last_stats                                # live bytes after each step, peak, peak step
"""
from .accounting import RunStats, StepRecord
from .capture import CaptureError
from .compiler import compile
from .plan import Plan

__all__ = ["CaptureError", "Plan", "RunStats", "StepRecord", "compile"]
