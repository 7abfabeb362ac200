"""The child side of `leanseg bench --zoo`: one model, one configuration, one way of measuring per process.

`measure="peak"` (run with mapped malloc): warm up, `probe.start()`, time the runs (their peak above the
baseline is reported), then, outside the measured window, compare logits and labels with eager's on every
sample image. `measure="latency"` (run with glibc's defaults, as a user's process runs): the median only.
A model is leanseg's own ("MobileUNet", "PlainUNet") or a zoo `.pt2`, opened with `load_model`.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from ..engine import compile
from ..model.sources import load_model
from .inference_cases import MODELS, SAMPLES, WARMUP_RUNS, build_model, sample_input
from .measure import Probe, median_seconds
from .onnx_session import ort_session

CONFIGS = ("eager no_grad", "engine fp32", "engine bf16", "onnxruntime")
MEASURES = ("peak", "latency")
WHOLE_MODEL = "<whole model>"  # what Plan.fallbacks holds when the graph could not be captured

Runner = Callable[[Tensor], Tensor]


def sample_count() -> int:
    """How many sample images the agreement runs on (assets/samples/*.png; 1 random input without them)."""
    return max(1, len(list(SAMPLES.glob("*.png"))))


def eager_model(model: str) -> tuple[nn.Module, str]:
    """(the eager reference in eval mode, where it came from): leanseg's own U-Net or a zoo `.pt2`."""
    if model in MODELS:
        return build_model(model)
    return load_model(model).model.eval(), "load_model(.pt2), random weights"


def _runners(config: str, model: str, onnx: str, size: int, threads: int
             ) -> tuple[Runner, Runner, Runner, dict[str, Any]]:
    """(the measured call, logits (1, K, H, W) float32, labels (1, H, W), extra figures) of one config."""
    if config == "onnxruntime":
        return _onnx_runners(model, Path(onnx), size, threads)
    net, weights = eager_model(model)
    if config == "eager no_grad":
        def eager(x: Tensor) -> Tensor:
            with torch.no_grad():
                return net(x)
        return eager, eager, lambda x: eager(x).argmax(1), {"weights": weights}
    if config in ("engine fp32", "engine bf16"):
        plan = compile(net, device="cpu", dtype=torch.bfloat16 if "bf16" in config else torch.float32)
        extra = {"weights": weights, "whole_model_fallback": WHOLE_MODEL in plan.fallbacks,
                 "eager_nodes": len([name for name in plan.fallbacks if name != WHOLE_MODEL]),
                 "fallbacks": plan.fallbacks[:50], "notes": plan.notes}
        return plan.run, lambda x: plan.run(x, output="logits"), plan.run, extra
    raise ValueError(f"unknown configuration {config!r}; valid: {', '.join(CONFIGS)}")


def _onnx_runners(model: str, path: Path, size: int, threads: int
                  ) -> tuple[Runner, Runner, Runner, dict[str, Any]]:
    import onnxruntime as ort  # the optional `bench` extra

    if not path.is_file():  # leanseg's own models: exported here, at this size, once per run
        torch.onnx.export(eager_model(model)[0], (torch.zeros(1, 3, size, size),), str(path), opset_version=17,
                          input_names=["image"], output_names=["logits"], dynamo=False)
    session = ort_session(path, threads)
    name = session.get_inputs()[0].name

    def run(x: Tensor) -> Tensor:
        return torch.from_numpy(session.run(None, {name: x.numpy()})[0])
    return run, run, lambda x: run(x).argmax(1), {"onnxruntime": ort.__version__}


def zoo_case(probe: Probe, model: str, size: int, config: str, measure: str, repeats: int, reference: str,
             onnx: str = "", threads: int = 2, device: str = "cpu") -> dict[str, Any]:
    """Peak above baseline (measure='peak', with agreement vs eager) or median seconds (measure='latency')."""
    if measure not in MEASURES:
        raise ValueError(f"unknown measure {measure!r}; valid: {', '.join(MEASURES)}")
    run_once, logits_of, labels_of, extra = _runners(config, model, onnx, size, threads)
    x = sample_input(size)
    for _ in range(WARMUP_RUNS):  # oneDNN primitives, ORT arenas, first touch of weights, thread arenas
        run_once(x)
    probe.start()
    seconds = median_seconds(lambda: run_once(x), repeats=repeats, warmup=0)
    result: dict[str, Any] = {"peak_bytes": probe.peak_bytes(), "seconds": seconds, **extra}
    if measure == "peak":
        del x
        result.update(_agreement(config, logits_of, labels_of, size, reference))
        if config == "eager no_grad":
            result.update(_eager_against_itself(logits_of, size, reference, threads))
    return result


def _agreement(config: str, logits_of: Runner, labels_of: Runner, size: int, reference: str) -> dict[str, Any]:
    """Eager saves its logits per sample (`reference`_i.pt); every other config compares with them."""
    max_diff, same, total = 0.0, 0, 0
    for index in range(sample_count()):
        x = sample_input(size, index)
        with torch.no_grad():
            logits = logits_of(x).float()
            labels = labels_of(x).long()
        path = Path(f"{reference}_{index}.pt")
        if config == "eager no_grad":
            torch.save(logits, path)
            continue
        expected = torch.load(path)
        max_diff = max(max_diff, float((logits - expected).abs().max()))
        same += int((labels == expected.argmax(1)).sum())
        total += labels.numel()
    if config == "eager no_grad":
        return {}
    return {"max_abs_diff": max_diff, "label_agreement": same / max(1, total), "samples": sample_count()}


def _eager_against_itself(logits_of: Runner, size: int, reference: str, threads: int) -> dict[str, Any]:
    """Eager again at another thread count, against its own saved logits: how far PyTorch moves its own
    logits and labels when only the summation order changes. Labels that flip here are ties that no other
    kernel can be expected to break the same way."""
    other = 1 if threads > 1 else 2
    torch.set_num_threads(other)
    try:
        max_diff, flipped = 0.0, 0
        for index in range(sample_count()):
            with torch.no_grad():
                logits = logits_of(sample_input(size, index)).float()
            expected = torch.load(Path(f"{reference}_{index}.pt"))
            max_diff = max(max_diff, float((logits - expected).abs().max()))
            flipped += int((logits.argmax(1) != expected.argmax(1)).sum())
    finally:
        torch.set_num_threads(threads)
    return {"self_threads": other, "self_max_abs_diff": max_diff, "self_label_flips": flipped}
