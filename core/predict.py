"""Segment one image with a loaded model: the one entry point CLI, jobs and GUI share."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from .device import bf16_is_fast, resolve_device
from .engine import Plan
from .engine import compile as compile_plan
from .engine.graph_lock import GRAPH_LOCK
from .engine.mirror import MIRROR_MODES
from .engine.multiscale import EXACT_WITH_SCALES, check_scales, format_scales
from .engine.oom import FaultInjection
from .engine.tiling import TilingOutcome
from .events import EventSink, JobCancelled, ignore_event
from .io.images import ImageData, to_model_input
from .memory import peak_bytes, reset_peak
from .model.checkpoint import LoadedModel
from .segment_tiled import segment_in_tiles

ENGINES = ("lean", "eager")
__all__ = ["ENGINES", "MIRROR_MODES", "PRECISIONS", "TILING_MODES", "InferenceOptions", "Segmentation", "Segmenter"]
PRECISIONS = ("fp32", "bf16")
TILING_MODES = ("auto", "exact", "fast", "off")


@dataclass(frozen=True)
class InferenceOptions:
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    engine: str = "lean"  # lean (memory-lean engine, leanseg.core.engine) | eager (plain PyTorch)
    precision: str = "fp32"  # fp32 | bf16
    memory_budget: int | None = None  # bytes; None: a fraction of free device memory
    tiling: str = "auto"  # auto (tile when the budget needs it) | exact | fast | off
    want_probs: bool = False  # also return per-class probabilities (K, H, W)
    mirror: str = "off"  # off | flip: average each tile's logits with its left-right mirror's (2x the time)
    scales: tuple[float, ...] = (1.0,)  # sizes each tile runs at, class probabilities averaged (multi-scale)

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ValueError(f"unknown engine {self.engine!r}; valid: {', '.join(ENGINES)}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"unknown precision {self.precision!r}; valid: {', '.join(PRECISIONS)}")
        if self.tiling not in TILING_MODES:
            raise ValueError(f"unknown tiling mode {self.tiling!r}; valid: {', '.join(TILING_MODES)}")
        if self.mirror not in MIRROR_MODES:
            raise ValueError(f"unknown mirror mode {self.mirror!r}; valid: {', '.join(MIRROR_MODES)}")
        if self.memory_budget is not None and self.memory_budget <= 0:
            raise ValueError(f"memory_budget must be positive bytes, got {self.memory_budget}")
        object.__setattr__(self, "scales", check_scales(tuple(self.scales)))
        if self.multiscale and self.tiling == "exact":
            raise ValueError(EXACT_WITH_SCALES)

    @property
    def multiscale(self) -> bool:
        """Whether the tiles run at any size but the image's own."""
        return self.scales != (1.0,)

    @property
    def averaging(self) -> list[str]:
        """The test-time averaging these options run, in words: ["mirror averaging", "multi-scale averaging at
        0.75 1 1.25"], [] for none."""
        words = ["mirror averaging"] if self.mirror == "flip" else []
        return words + ([f"multi-scale averaging at {format_scales(self.scales)}"] if self.multiscale else [])


@dataclass
class Segmentation:
    labels: np.ndarray  # (H, W) uint8 class index per pixel
    seconds: float  # inference time, preprocessing included
    peak_bytes: int  # peak memory while inferring (device allocated, or process RSS high-water)
    device: str
    start_bytes: int = 0  # what was in use as inference began, in the same measure as peak_bytes
    probs: np.ndarray | None = None  # (K, H, W) float32 when asked for
    notes: list[str] = field(default_factory=list)  # e.g. what tiling the plan chose
    peak_device: str = ""  # where peak_bytes was measured (the segmenter's device; `device` may be a CPU fallback's)
    tiling: TilingOutcome | None = None  # what the tiler did: its tiles and their peak (None: not from a Segmenter)


class Segmenter:
    """Owns a model on a device and segments images with it."""

    def __init__(self, loaded: LoadedModel, options: InferenceOptions | None = None) -> None:
        self.loaded = loaded
        self.options = options or InferenceOptions()
        self.device = resolve_device(self.options.device)
        self.model = loaded.model.eval().to(self.device)
        self.notes: list[str] = []  # said once per job, e.g. a precision this device cannot run fast
        if self.options.precision == "bf16" and not bf16_is_fast(self.device):
            self.notes.append(f"bf16 asked for, but this {self.device.type.upper()} has no native bf16 convolutions "
                              "(AVX512-BF16/AMX or a bf16 GPU): running fp32, which is faster here")
            self.options = replace(self.options, precision="fp32")
        # The engine's compiled plan (None with engine='eager'); the tiler runs it per tile.
        self.plan: Plan | None = None
        if self.options.engine == "lean":
            dtype = torch.bfloat16 if self.options.precision == "bf16" else torch.float32
            with GRAPH_LOCK:  # capture traces the model: no other thread may run one meanwhile
                self.plan = compile_plan(self.model, device=self.device, dtype=dtype,
                                         memory_budget=self.options.memory_budget)
        self.fault_injection: FaultInjection | None = None  # test hook: fail chosen tiles as if out of memory

    @property
    def info(self):  # type: ignore[no-untyped-def]
        return self.loaded.info

    def prepare(self, image: ImageData) -> torch.Tensor:
        """(1, C, H, W) float32 on the device."""
        info = self.loaded.info
        array = to_model_input(image, info.config.in_channels, info.mean, info.std)
        return torch.from_numpy(array)[None].to(self.device)

    def segment(
        self,
        image: ImageData,
        *,
        cancel: threading.Event | None = None,
        on_event: EventSink = ignore_event,
    ) -> Segmentation:
        """Labels (H, W) uint8 for one image; raises JobCancelled if `cancel` is set."""
        if cancel is not None and cancel.is_set():
            raise JobCancelled()
        with GRAPH_LOCK:  # one model runs at a time in a process; no trace patches module calls meanwhile
            start_bytes = reset_peak(self.device)
            start = time.perf_counter()
            result = segment_in_tiles(self, image, cancel=cancel, on_event=on_event)  # whole image = one tile
            seconds = time.perf_counter() - start
        return Segmentation(
            labels=result.labels,
            seconds=seconds,
            peak_bytes=peak_bytes(self.device),
            device=result.tiling.device,
            start_bytes=start_bytes,
            probs=result.probs,
            notes=[*self.notes, *result.tiling.user_notes],
            peak_device=str(self.device),
            tiling=result.tiling,
        )

    def _run_eager(self, x: torch.Tensor) -> tuple[np.ndarray, np.ndarray | None]:
        bf16 = self.options.precision == "bf16"
        with torch.inference_mode(), torch.autocast(self.device.type, torch.bfloat16, enabled=bf16):
            logits = self.model(x)[0].float()  # (K, H, W)
            labels = logits.argmax(0).to(torch.uint8).cpu().numpy()
            probs = logits.softmax(0).cpu().numpy() if self.options.want_probs else None
        return labels, probs
