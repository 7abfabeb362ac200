"""The child side of `leanseg bench` (inference): one configuration, one model, one size per process.

Each case builds the model and a CamVid sample scaled to size x size, warms up, calls
`probe.start()`, times the runs (their peak is what is reported), then, outside the measured
window, compares its logits / labels with the eager fp32 reference that the `eager no_grad`
case saved beside the JSON.
"""
from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cv2
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..assets import default_model_path
from ..engine import compile
from ..io.images import ImageData, read_image, to_model_input
from ..model import MobileUNet, MobileUNetConfig, PlainUNet, PlainUNetConfig
from ..model.sources import load_model
from .measure import Probe, median_seconds
from .onnx_session import ort_session

SAMPLES = Path(__file__).resolve().parents[2] / "assets" / "samples"
MODELS = ("MobileUNet", "PlainUNet")
# The shipped model's configuration (CamVid, 11 classes); PlainUNet is the classic comparison.
MOBILE_CONFIG = MobileUNetConfig(num_classes=11, width=0.75)
PLAIN_CONFIG = PlainUNetConfig(num_classes=11)


WARMUP_RUNS = 2  # a process's first run allocates for good (+20 MB at 1024), its second still +8 MB; then steady


def build_model(kind: str) -> tuple[nn.Module, str]:
    """(model in eval mode, where its weights came from): the shipped MobileUNet when installed."""
    torch.manual_seed(0)
    if kind == "MobileUNet":
        path = default_model_path()
        if path.is_file():
            return load_model(path).model.eval(), "trained (assets)"
        return MobileUNet(MOBILE_CONFIG).eval(), "random init"
    if kind == "PlainUNet":
        return PlainUNet(PLAIN_CONFIG).eval(), "random init"
    raise ValueError(f"unknown model {kind!r}; valid: {', '.join(MODELS)}")


def sample_input(size: int, index: int = 0) -> Tensor:
    """(1, 3, size, size) float32: a CamVid sample scaled to size x size, ImageNet-normalised."""
    paths = sorted(SAMPLES.glob("*.png"))
    if not paths:
        return torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(index))
    pixels = read_image(paths[index % len(paths)]).pixels[..., :3]
    resized = cv2.resize(pixels, (size, size), interpolation=cv2.INTER_LINEAR)

    array = to_model_input(ImageData(resized), 3, (0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
    return torch.from_numpy(array)[None]


def _runner(config: str, model: nn.Module, x: Tensor, device: torch.device, threads: int
            ) -> tuple[Callable[[], object], Callable[[], Tensor], dict[str, Any]]:
    """(the measured call, a call returning logits (1, K, H, W) for the comparison, extra figures)."""
    extra: dict[str, Any] = {}
    if config in ("eager no_grad", "eager inference_mode"):
        context = torch.no_grad if config == "eager no_grad" else torch.inference_mode

        def eager() -> Tensor:
            with context():
                return model(x)
        return eager, eager, extra
    if config.startswith("engine"):
        dtype = torch.bfloat16 if "bf16" in config else torch.float32
        whole = "whole" in config
        plan = compile(model, device=device, dtype=dtype, bands=not whole, head=not whole)
        extra["estimate_bytes"] = plan.estimate_peak(tuple(x.shape))
        extra["plan"] = plan.describe().replace("\n", "; ")
        extra["_plan"] = plan
        return (lambda: plan.run(x)), (lambda: plan.run(x, output="logits")), extra
    if config == "onnxruntime":
        return _onnx_runner(model, x, threads)
    if config == "train step":
        model.train()
        target = torch.zeros(x.shape[0], *x.shape[2:], dtype=torch.long)

        def step() -> Tensor:
            logits = model(x)
            F.cross_entropy(logits, target).backward()
            model.zero_grad(set_to_none=True)
            return logits.detach()
        return step, step, extra
    if config == "eval grad":
        return (lambda: model(x)), (lambda: model(x).detach()), extra
    raise ValueError(f"unknown configuration {config!r}")


def _onnx_runner(model: nn.Module, x: Tensor, threads: int
                 ) -> tuple[Callable[[], object], Callable[[], Tensor], dict[str, Any]]:
    import onnxruntime as ort  # the optional `bench` extra

    path = Path(tempfile.mkdtemp(prefix="leanseg-onnx-")) / "model.onnx"
    torch.onnx.export(model, (x,), str(path), opset_version=17, input_names=["image"], output_names=["logits"],
                      dynamo=False)
    session = ort_session(path, threads)
    feed = {"image": x.numpy()}

    def run() -> Tensor:
        return torch.from_numpy(session.run(None, feed)[0])
    return run, run, {"onnxruntime": ort.__version__}


def inference_case(probe: Probe, kind: str, size: int, config: str, repeats: int, reference: str,
                   device: str = "cpu", threads: int = 2) -> dict[str, Any]:
    """Peak above baseline and median seconds of one configuration; agreement with the reference."""
    dev = torch.device(device)
    model, weights = build_model(kind)
    model = model.to(dev)
    x = sample_input(size).to(dev)
    run_once, logits_of, extra = _runner(config, model, x, dev, threads)

    def measured() -> None:
        run_once()
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)  # CUDA calls return before the kernels finish

    for _ in range(WARMUP_RUNS):  # oneDNN primitives, ORT arenas, first touch of weights, thread arenas
        measured()
    probe.start()
    seconds = median_seconds(measured, repeats=repeats, warmup=0)
    result: dict[str, Any] = {"peak_bytes": probe.peak_bytes(), "seconds": seconds, "weights": weights}
    if dev.type == "cuda":
        result["reserved_bytes"] = int(torch.cuda.memory_reserved(dev))  # what the caching allocator keeps
    plan = extra.pop("_plan", None)
    if plan is not None and plan.last_stats is not None:
        result["accounted_bytes"] = plan.last_stats.peak_bytes
        result["accounted_peak_step"] = plan.last_stats.peak_step
    result.update(extra)
    if config == "train step":
        return result  # no comparison: training-mode BatchNorm computes something else
    with torch.no_grad():
        logits = logits_of().float().cpu()
    reference_path = Path(reference)
    if config == "eager no_grad":
        torch.save(logits, reference_path)
    elif reference_path.is_file():
        expected = torch.load(reference_path)
        result["max_abs_diff"] = float((logits - expected).abs().max())
        result["label_agreement"] = float((logits.argmax(1) == expected.argmax(1)).double().mean())
    return result
