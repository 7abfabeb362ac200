"""Exact accounting: live bytes per step, the peak and its step, estimate_peak, the gauge, budgets."""
from __future__ import annotations

import pytest
import torch

from leanseg.core.engine import compile
from leanseg.core.memory import engine_live_bytes
from leanseg.core.model import MobileUNet, MobileUNetConfig

from .nets import randomise_batchnorm

CONFIG = MobileUNetConfig(num_classes=4, width=0.35, decoder_channels=(16, 16, 8, 8), decoder_expansion=3)


@pytest.fixture(scope="module")
def model() -> torch.nn.Module:
    torch.manual_seed(0)
    return randomise_batchnorm(MobileUNet(CONFIG))


def test_last_stats_record_every_step(model: torch.nn.Module) -> None:
    plan = compile(model, device="cpu")
    seen: list[tuple[str, int]] = []
    engine_live_bytes.reset_peak()
    plan.run(torch.randn(1, 3, 64, 96), on_step=lambda name, live: seen.append((name, live)))
    stats = plan.last_stats
    assert stats is not None and stats.input_shape == (1, 3, 64, 96)
    assert [(s.name, s.live_bytes) for s in stats.steps] == seen
    assert stats.peak_bytes == max(s.peak_bytes for s in stats.steps) > 0
    assert stats.peak_step in {s.name for s in stats.steps}
    assert all(s.peak_bytes >= s.live_bytes for s in stats.steps)
    # at the end only the labels are held: (1, 64, 96) uint8
    assert stats.steps[-1].live_bytes == 64 * 96
    assert engine_live_bytes.peak == max(s.live_bytes for s in stats.steps)  # published while it ran ...
    assert engine_live_bytes.value == 0  # ... and none held once the labels are the caller's


def test_estimate_peak_matches_the_run(model: torch.nn.Module) -> None:
    plan = compile(model, device="cpu")
    for shape in [(1, 3, 64, 96), (1, 3, 45, 61)]:
        for output in ("labels", "logits"):
            predicted = plan.estimate_peak(shape, output=output)
            plan.run(torch.randn(shape), output=output)
            assert plan.last_stats is not None and predicted == plan.last_stats.peak_bytes


def test_the_input_copy_dies_after_its_first_reader(model: torch.nn.Module) -> None:
    """The final crop reads only the input's shape, so the engine's copy of the input is freed early."""
    plan = compile(model, device="cpu")
    assert any("read their reference's shape only" in note for note in plan.describe().splitlines())
    shape = (1, 3, 64, 96)
    plan.run(torch.randn(shape))
    assert plan.last_stats is not None
    steps = {s.name: s for s in plan.last_stats.steps}
    input_copy = 3 * 64 * 96 * 4
    first_conv = steps["encoder.blocks.0.0"]
    # after the first conv: its output only (16 channels at half resolution), not the input copy too
    assert first_conv.live_bytes < first_conv.peak_bytes
    assert first_conv.peak_bytes - first_conv.live_bytes >= input_copy


def test_bands_lower_the_peak(model: torch.nn.Module) -> None:
    whole = compile(model, device="cpu", bands=False, head=False)
    banded = compile(model, device="cpu")
    shape = (1, 3, 1024, 1024)  # estimates run on meta tensors: no arithmetic, any size is quick
    assert banded.estimate_peak(shape) < 0.5 * whole.estimate_peak(shape)


def test_memory_budget_shrinks_bands(model: torch.nn.Module) -> None:
    roomy = compile(model, device="cpu")
    tight = compile(model, device="cpu", memory_budget=2**20)
    assert "memory budget" in tight.describe()
    shape = (1, 3, 256, 256)
    assert tight.estimate_peak(shape) < roomy.estimate_peak(shape)
    x = torch.randn(shape)
    assert torch.equal(tight.run(x), roomy.run(x))


def test_residual_adds_run_in_place() -> None:
    class TwoAdds(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = x * 2  # 1 tensor
            z = y + 1.0  # y still needed below
            return z + y  # both die here: written into z, no new tensor

    plan = compile(TwoAdds(), device="cpu")
    x = torch.randn(1, 2, 8, 8)
    torch.testing.assert_close(plan.run(x, output="logits"), x * 2 + 1 + x * 2)
    stats = plan.last_stats
    assert stats is not None
    one = 2 * 8 * 8 * 4
    by_name = {s.name: s for s in stats.steps}
    assert by_name["add_1"].peak_bytes == 2 * one  # y and z; the sum reuses z


class Cancelled(Exception):
    pass


def test_a_run_stopped_between_steps_leaves_the_gauge_at_zero(model: torch.nn.Module) -> None:
    """A cancel raises from on_step after the step published its live bytes; the tensors go with the run, and so
    does the gauge's figure (the app's memory panel draws it)."""
    plan = compile(model, device="cpu")
    steps: list[int] = []

    def stop_at_tenth_step(name: str, live: int) -> None:
        steps.append(live)
        if len(steps) == 10:
            raise Cancelled

    with pytest.raises(Cancelled):
        plan.run(torch.randn(1, 3, 64, 96), on_step=stop_at_tenth_step)
    assert steps[-1] > 64 * 96 and engine_live_bytes.value == 0
