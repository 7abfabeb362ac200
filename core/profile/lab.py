"""The memory lab: the profile and the comparison table for one model at one input size, each
configuration in its own subprocess, with progress events and cancel.

    result = run_lab(LabRequest(spec, size=1024), cancel=threading.Event(), on_event=print)
    result.rows        # one per configuration: peak_bytes, seconds (or error)
    result.eager, result.engine, result.bounds   # the profiles and lower bounds
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from ..events import EventSink, JobCancelled, JobEvent, ignore_event
from ..memory import format_bytes
from .model_spec import ModelSpec
from .records import LowerBounds, MemoryProfile
from .runner import run_case_cancellable

CASES = "leanseg.core.profile.cases"


@dataclass(frozen=True)
class Configuration:
    name: str  # as the table and the chart show it
    case: str  # function in leanseg.core.profile.cases
    options: dict[str, Any]  # its own arguments besides spec, size, repeats, device


CONFIGURATIONS: tuple[Configuration, ...] = (
    Configuration("train plain", "train_case", {"checkpointing": False}),
    Configuration("train checkpointed", "train_case", {"checkpointing": True}),
    Configuration("eval with grad", "eager_case", {"grad_mode": "grad"}),
    Configuration("eval no_grad", "eager_case", {"grad_mode": "no_grad"}),
    Configuration("eval inference_mode", "eager_case", {"grad_mode": "inference_mode"}),
    Configuration("engine fp32", "engine_case", {"precision": "fp32"}),
    Configuration("engine bf16", "engine_case", {"precision": "bf16"}),
    Configuration("engine tiled", "engine_tiled_case", {}),
)
CONFIGURATION_NAMES = tuple(c.name for c in CONFIGURATIONS)


@dataclass(frozen=True)
class LabRequest:
    spec: ModelSpec
    size: int = 1024  # square input side, pixels
    repeats: int = 3  # timed repetitions per configuration (median), after one warm-up
    device: str = "cpu"  # cpu | cuda | cuda:N
    threads: int = 2  # CPU threads per configuration
    configurations: tuple[str, ...] = CONFIGURATION_NAMES  # which rows to run
    profile: bool = True  # also compute the per-step profiles and the lower bounds

    def __post_init__(self) -> None:
        if not 16 <= self.size <= 16384:
            raise ValueError(f"size must be 16..16384 pixels, got {self.size}")
        if self.repeats < 1:
            raise ValueError(f"repeats must be >= 1, got {self.repeats}")
        if self.threads < 1:
            raise ValueError(f"threads must be >= 1, got {self.threads}")
        unknown = [name for name in self.configurations if name not in CONFIGURATION_NAMES]
        if unknown:
            raise ValueError(f"unknown configurations {unknown}; valid: {', '.join(CONFIGURATION_NAMES)}")


@dataclass
class LabResult:
    model: str  # what was profiled, in words
    size: int
    device: str
    rows: list[dict[str, Any]] = field(default_factory=list)  # name, peak_bytes, seconds | error, extras
    eager: MemoryProfile | None = None
    engine: MemoryProfile | None = None
    bounds: LowerBounds | None = None
    profile_error: str | None = None

    def row(self, name: str) -> dict[str, Any] | None:
        return next((r for r in self.rows if r["name"] == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "size": self.size, "device": self.device, "rows": self.rows,
                "eager": self.eager.to_dict() if self.eager else None,
                "engine": self.engine.to_dict() if self.engine else None,
                "bounds": self.bounds.to_dict() if self.bounds else None, "profile_error": self.profile_error}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LabResult:
        bounds = data.get("bounds")
        return cls(data["model"], int(data["size"]), data["device"], list(data.get("rows", [])),
                   MemoryProfile.from_dict(data["eager"]) if data.get("eager") else None,
                   MemoryProfile.from_dict(data["engine"]) if data.get("engine") else None,
                   LowerBounds(**bounds) if bounds else None, data.get("profile_error"))


def run_lab(request: LabRequest, *, cancel: threading.Event | None = None,
            on_event: EventSink = ignore_event) -> LabResult:
    """Profile, then each configuration in its own subprocess; raises JobCancelled when `cancel` is set
    (the running subprocess is terminated). Events: start, info per configuration (data 'row' when
    one finishes, 'profile' when the profile is in), done."""
    cancel = cancel or threading.Event()
    chosen = [c for c in CONFIGURATIONS if c.name in request.configurations]
    count = len(chosen) + int(request.profile)
    result = LabResult(request.spec.describe(), request.size, request.device)
    common = {"spec": request.spec.to_dict(), "size": request.size, "device": request.device}
    on_event(JobEvent("start", f"memory lab: {result.model} at {request.size}x{request.size}, {count} runs",
                      count=count))
    index = 0
    try:
        if request.profile:
            on_event(JobEvent("info", "profile (eager and engine, step by step) ...", index=0, count=count))
            data = run_case_cancellable(f"{CASES}:profile_case", common, cancel=cancel, threads=request.threads)
            _take_profile(result, data)
            on_event(JobEvent("info", _profile_line(result), index=0, count=count, data={"profile": True}))
            index = 1
        for offset, configuration in enumerate(chosen):
            if cancel.is_set():
                raise JobCancelled()
            position = index + offset
            on_event(JobEvent("info", f"{configuration.name} ...", index=position, count=count))
            kwargs = {**common, **configuration.options}
            if configuration.case != "profile_case":
                kwargs["repeats"] = request.repeats
            data = run_case_cancellable(f"{CASES}:{configuration.case}", kwargs, cancel=cancel,
                                        threads=request.threads)
            row = {"name": configuration.name, **data}
            result.rows.append(row)
            on_event(JobEvent("info", row_line(row), index=position, count=count, data={"row": row}))
    except JobCancelled:
        on_event(JobEvent("cancelled", "memory lab cancelled"))
        raise
    on_event(JobEvent("done", f"memory lab finished: {len(result.rows)} configurations", data={"result": result}))
    return result


def _take_profile(result: LabResult, data: dict[str, Any]) -> None:
    if "error" in data:
        result.profile_error = str(data["error"])
        return
    result.eager = MemoryProfile.from_dict(data["eager"])
    result.engine = MemoryProfile.from_dict(data["engine"])
    result.bounds = LowerBounds(**data["bounds"])


def _profile_line(result: LabResult) -> str:
    if result.profile_error:
        return f"profile failed: {result.profile_error}"
    assert result.eager is not None and result.engine is not None
    return (f"profile: eager peak {format_bytes(result.eager.peak_bytes)} at {_peak_layer(result.eager)}, "
            f"engine peak {format_bytes(result.engine.peak_bytes)} at {_peak_layer(result.engine)}")


def _peak_layer(profile: MemoryProfile) -> str:
    step = profile.peak_step
    return step.layer if step else "-"


def row_line(row: dict[str, Any]) -> str:
    """'engine fp32: peak 180.0 MB, 0.97 s' (or the error)."""
    if "error" in row:
        return f"{row['name']}: error: {row['error']}"
    return f"{row['name']}: peak {format_bytes(row['peak_bytes'])}, {row['seconds']:.3g} s"
