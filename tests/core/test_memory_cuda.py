"""CUDA memory telemetry; skipped where no GPU is present."""
from __future__ import annotations

import time

import pytest
import torch

from leanseg.core.memory import SOURCE_CUDA, MemoryMonitor, empty_cache

MB = 10**6


@pytest.mark.skipif(torch.cuda.is_initialized(), reason="CUDA already initialised in this process")
def test_cuda_monitor_reads_zeros_and_never_initialises_cuda() -> None:
    """Sampling must not create a CUDA context (hundreds of MB) before the app itself uses the GPU."""
    monitor = MemoryMonitor("cuda")
    assert monitor.source == SOURCE_CUDA
    sample = monitor.sample_now()
    monitor.reset_peak()
    assert (sample.allocated, sample.reserved, sample.peak_allocated) == (0, 0, 0)
    assert sample.device == "cuda:0" and sample.device_total is None and sample.device_free is None
    assert sample.rss > 0
    assert monitor.empty_cache() == 0
    assert not torch.cuda.is_initialized()
    monitor.close()


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_allocated_reserved_peak_and_empty_cache() -> None:
    device = torch.device("cuda", 0)
    torch.ones(1, device=device)  # initialise CUDA
    torch.cuda.synchronize(device)
    monitor = MemoryMonitor("cuda:0")
    assert monitor.source == SOURCE_CUDA
    before = monitor.sample_now()
    assert before.device == "cuda:0" and before.device_total and before.device_free
    tensor = torch.ones(25_000_000, device=device)  # 100 MB
    torch.cuda.synchronize(device)
    during = monitor.sample_now()
    assert abs(during.allocated - before.allocated - 100 * MB) <= 2 * MB  # rounded up to 512 bytes
    assert during.reserved >= during.allocated
    del tensor
    after = monitor.sample_now()
    assert after.allocated == before.allocated
    assert after.reserved - after.allocated >= 100 * MB  # cached by PyTorch
    freed = monitor.empty_cache()
    assert freed >= 100 * MB
    assert monitor.sample_now().reserved <= after.reserved - 100 * MB
    monitor.close()


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_spike_between_samples_shows_in_peak() -> None:
    device = torch.device("cuda", 0)
    torch.ones(1, device=device)
    monitor = MemoryMonitor(device)
    monitor.reset_peak()
    before = monitor.sample_now()
    tensor = torch.ones(25_000_000, device=device)
    torch.cuda.synchronize(device)
    time.sleep(0.05)
    del tensor
    after = monitor.sample_now()
    assert after.peak_allocated - before.allocated >= 100 * MB
    assert after.allocated == before.allocated
    monitor.reset_peak()
    assert monitor.sample_now().peak_allocated == before.allocated
    assert empty_cache(device) >= 0
    monitor.close()
