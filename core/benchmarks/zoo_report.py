"""What `leanseg bench --zoo` concludes from its rows: geometric means against ONNX Runtime, the engine's
targets for any model (one line each, met or missed), and a bar chart of peak and latency per model."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from .report import verdict
from .zoo_cases import CONFIGS

# The engine's targets for any convolutional model at fp32 (bf16 where said); issue 15 set them.
MAX_DIFF = 1e-4  # max |logit diff| vs eager
PEAK_X_EAGER = 0.25  # peak above baseline / eager no_grad's
TIME_X_ORT = 1.5  # engine fp32 latency / ONNX Runtime's, each model
GEOMEAN_X_ORT = 1.2  # the same, geometric mean over the zoo
BF16_X_ORT = 1.0  # engine bf16 latency / ONNX Runtime's
BF16_AGREEMENT = 0.995  # bf16 labels equal to fp32 eager's


def _row(rows: list[dict[str, Any]], model: str, config: str) -> dict[str, Any] | None:
    return next((r for r in rows if r["model"] == model and r["config"] == config and "seconds" in r), None)


def geomean_lines(zoo_rows: list[dict[str, Any]]) -> list[str]:
    """Geometric mean of engine latency / ONNX Runtime latency over the zoo models, fp32 and bf16."""
    lines = []
    for config, bar in (("engine fp32", GEOMEAN_X_ORT), ("engine bf16", None)):
        ratios = [r["x ORT time"] for r in zoo_rows if r["config"] == config and "x ORT time" in r]
        if not ratios:
            continue
        mean = math.exp(sum(math.log(v) for v in ratios) / len(ratios))
        target = f" (target <= {bar}: {verdict(mean <= bar)})" if bar else ""
        lines.append(f"geometric mean of {config} latency / ONNX Runtime's over {len(ratios)} zoo models: "
                     f"{mean:.3f}x{target}")
    return lines


def _eager_floor(zoo_rows: list[dict[str, Any]], model: str) -> str:
    """What eager's own labels do at another thread count, beside a labels line ("" when not measured)."""
    eager = _row(zoo_rows, model, "eager no_grad")
    if eager is None or "self_label_flips" not in eager:
        return ""
    return f" (eager itself at {eager['self_threads']} thread(s): {eager['self_label_flips']} px flip)"


def bar_lines(zoo_rows: list[dict[str, Any]]) -> list[str]:
    """A heading, then one line per model and precision: each target's figure, met or missed."""
    lines = ["the engine's targets, per model (what leanseg aims for on any convolutional net: a MISSED one is the "
             "engine's shortfall, not a fault of the model):"]
    for model in dict.fromkeys(r["model"] for r in zoo_rows):
        fp32 = _row(zoo_rows, model, "engine fp32")
        if fp32 is not None:
            checks = [(f"whole-model fallback {fp32['whole_model_fallback']}, {fp32['eager_nodes']} nodes eager",
                       not fp32["whole_model_fallback"]),
                      (f"max|dlogit| {fp32['max_abs_diff']:.1e} (target {MAX_DIFF})", fp32["max_abs_diff"] <= MAX_DIFF),
                      (f"labels {100 * fp32['label_agreement']:.3f}% same{_eager_floor(zoo_rows, model)}",
                       fp32["label_agreement"] == 1.0)]
            if "x eager mem" in fp32:
                checks.append((f"peak {fp32['x eager mem']}x eager (target {PEAK_X_EAGER})",
                               fp32["x eager mem"] <= PEAK_X_EAGER))
            if "x ORT time" in fp32:
                checks.append((f"time {fp32['x ORT time']}x ORT (target {TIME_X_ORT})",
                               fp32["x ORT time"] <= TIME_X_ORT))
            lines.append(f"{model} fp32: " + "; ".join(f"{text}: {verdict(ok)}" for text, ok in checks))
        bf16 = _row(zoo_rows, model, "engine bf16")
        if bf16 is not None:
            checks = [(f"labels {100 * bf16['label_agreement']:.2f}% same as fp32 eager (target "
                       f"{100 * BF16_AGREEMENT}%)", bf16["label_agreement"] >= BF16_AGREEMENT)]
            if "x ORT time" in bf16:
                checks.append((f"time {bf16['x ORT time']}x ORT (target {BF16_X_ORT})",
                               bf16["x ORT time"] <= BF16_X_ORT))
            lines.append(f"{model} bf16: " + "; ".join(f"{text}: {verdict(ok)}" for text, ok in checks))
    return lines


def chart(rows: list[dict[str, Any]], path: Path) -> Path | None:
    """Grouped bars, one group per model, one bar per configuration: peak (MB) above, latency (s) below."""
    measured = [r for r in rows if "seconds" in r]
    if not measured:
        return None
    from matplotlib.figure import Figure  # drawn with the Agg canvas; no pyplot, no display

    models = list(dict.fromkeys(r["model"] for r in measured))
    configs = [c for c in CONFIGS if any(r["config"] == c for r in measured)]
    figure = Figure(figsize=(max(6.0, 1.6 * len(models)), 7.0), layout="constrained")
    width = 0.8 / len(configs)
    for axes, key, scale, label in zip(figure.subplots(2, 1, sharex=True), ("peak_bytes", "seconds"), (1e-6, 1.0),
                                       ("peak above baseline (MB)", "latency (s)")):
        for i, config in enumerate(configs):
            values = [(_row(measured, m, config) or {}).get(key, math.nan) * scale for m in models]
            axes.bar([j + (i - (len(configs) - 1) / 2) * width for j in range(len(models))], values, width,
                     label=config)
        axes.set_ylabel(label)
        axes.grid(axis="y", alpha=0.3)
    axes.set_xticks(range(len(models)), models, rotation=20, ha="right")
    figure.axes[0].legend(fontsize="small")
    figure.axes[0].set_title(f"leanseg bench --zoo, {measured[0]['size']} px square")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    return path
