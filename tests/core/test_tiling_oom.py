"""Out-of-memory recovery, driven by the injection hook: smaller tiles, then the CPU, then a clear error."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from leanseg.core.engine.oom import FaultInjection, OutOfMemory, is_out_of_memory, next_attempt
from leanseg.core.engine.tile_plan import TilingPlan
from leanseg.core.engine.tiling import ArraySink, array_source, eager_runner, run_tiles
from leanseg.core.events import JobEvent
from leanseg.core.io.images import ImageData
from leanseg.core.jobs import segment_files

from .tiling_samples import cpu_segmenter

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture
def image() -> ImageData:
    return ImageData(np.random.default_rng(3).integers(0, 256, (90, 134, 3), dtype=np.uint8))


@pytest.mark.parametrize("error, engine", [(MemoryError, "eager"), (torch.cuda.OutOfMemoryError, "lean")])
def test_whole_image_oom_retries_with_halved_tiles_and_stays_exact(unet_checkpoint: Path, image: ImageData,
                                                                   error: type[BaseException], engine: str) -> None:
    reference = cpu_segmenter(unet_checkpoint, tiling="off").segment(image).labels
    injection = FaultInjection(frozenset({0, 1, 2}), at_step=5, error=error)  # mid-run, tensors alive
    events: list[JobEvent] = []
    result = cpu_segmenter(unet_checkpoint, injection, engine=engine).segment(image, on_event=events.append)
    warnings = [e for e in events if e.kind == "warning"]
    assert injection.raised == [0, 1, 2]
    assert [e.data["tile_px"] for e in warnings] == [68, 32, 16]  # 136 px whole -> halves, stride-aligned
    assert all(e.data["halo_px"] == 28 for e in warnings)  # the split whole image goes on as exact tiles
    assert "retrying with 68 px tiles" in warnings[0].message
    assert result.notes[1:] == [e.message for e in warnings]
    tiles = [e for e in events if e.kind == "tile"]
    assert tiles[-1].count == len(tiles) and tiles[-1].index == len(tiles) - 1
    assert np.array_equal(result.labels, reference)


def test_oom_on_a_later_tile_redoes_only_that_tile(unet_checkpoint: Path, image: ImageData) -> None:
    injection = FaultInjection(frozenset({3}))
    events: list[JobEvent] = []
    reference = cpu_segmenter(unet_checkpoint, tiling="off").segment(image).labels
    result = cpu_segmenter(unet_checkpoint, injection, memory_budget=1_500_000).segment(image, on_event=events.append)
    plan = next(e for e in events if e.kind == "plan")
    tiles = [e for e in events if e.kind == "tile"]
    first_tiles = plan.data["grid"][0] * plan.data["grid"][1]
    assert len(tiles) > first_tiles  # tile 4 of the plan was split into smaller tiles
    areas = [(c[1] - c[0]) * (c[3] - c[2]) for c in (e.data["core"] for e in tiles)]
    assert sum(areas) == 90 * 134 and max(areas[3:7]) <= (max(plan.data["tile_shape"]) // 2) ** 2
    assert np.array_equal(result.labels, reference)


def test_smallest_tile_failing_on_a_device_falls_back_to_the_cpu(small_unet: torch.nn.Module,
                                                                   image: ImageData) -> None:
    model = small_unet
    cpu = torch.device("cpu")
    pixels = image.pixels

    def normalise(tile: np.ndarray) -> np.ndarray:
        return np.moveaxis(tile, -1, 0).astype(np.float32) / 255.0

    injection = FaultInjection(frozenset(range(5)))
    plan = TilingPlan("exact", 90, 134, (64, 64), 28, 4, 28)
    labels = np.zeros((90, 134), np.uint8)
    events: list[JobEvent] = []
    accelerator = torch.device("meta")  # stands in for a GPU: any device that is not the CPU
    outcome = run_tiles(plan, array_source(pixels, normalise), ArraySink(labels),
                        eager_runner(model, cpu, injection=injection), device=accelerator,
                        on_event=events.append, cpu_runner=lambda: eager_runner(model, cpu))
    messages = [e.message for e in events if e.kind == "warning"]
    assert [e.data["tile_px"] for e in events if e.kind == "warning"] == [32, 16, 8, 8]
    assert "falling back to the CPU" in messages[-1]
    assert outcome.device == "cpu" and outcome.tile_shape == (8, 8)
    with torch.inference_mode():
        whole = model(torch.from_numpy(normalise(pixels))[None])[0].argmax(0).numpy()
    assert np.array_equal(labels, whole)


def test_out_of_memory_on_the_cpu_at_the_smallest_tile_is_a_clear_error(unet_checkpoint: Path,
                                                                        tmp_path: Path) -> None:
    import cv2

    source = tmp_path / "scan.png"
    cv2.imwrite(str(source), np.zeros((40, 40, 3), np.uint8))
    injection = FaultInjection(frozenset(range(100)))
    events: list[JobEvent] = []
    summary = segment_files([source], tmp_path / "out", cpu_segmenter(unet_checkpoint, injection),
                            on_event=events.append)
    assert not summary.all_ok
    assert "smallest tile" in summary.failed[0].error and "--memory-budget" in summary.failed[0].error
    assert any(e.kind == "error" for e in events)
    assert not (tmp_path / "out" / "scan_labels.png").exists()


def test_next_attempt_and_error_recognition() -> None:
    cuda = torch.device("cuda")
    assert next_attempt(cuda, 1024, 64, 32, True).tile_px == 512
    assert next_attempt(cuda, 96, 64, 32, True).action == "cpu"
    with pytest.raises(OutOfMemory, match="smallest tile"):
        next_attempt(torch.device("cpu"), 96, 64, 32, True)
    assert is_out_of_memory(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert not is_out_of_memory(RuntimeError("shape mismatch"))
