"""Activation checkpointing: same gradients and running statistics as plain training, less saved."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from leanseg.core.model import MobileUNet, MobileUNetConfig, PlainUNet, PlainUNetConfig
from leanseg.core.train import loop
from leanseg.core.train.checkpointing import enable_activation_checkpointing, plan_activation_checkpointing
from leanseg.core.train.loop import train
from leanseg.core.train.options import TrainConfig

from .test_train import make_dataset

MODELS: dict[str, Callable[[], nn.Module]] = {
    "MobileUNet": lambda: MobileUNet(MobileUNetConfig(num_classes=3, width=0.25)),
    "PlainUNet": lambda: PlainUNet(PlainUNetConfig(num_classes=3, base_channels=4, depth=3)),
}


def twins(kind: str) -> tuple[nn.Module, nn.Module]:
    torch.manual_seed(0)
    plain, lean = MODELS[kind](), MODELS[kind]()
    lean.load_state_dict(plain.state_dict())
    return plain.train(), lean.train()


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    return torch.randn(2, 3, 32, 40, generator=generator), torch.randint(0, 3, (2, 32, 40), generator=generator)


def saved_bytes(model: nn.Module, x: torch.Tensor) -> int:
    """Bytes of the activations a training forward keeps for backward (weights left out)."""
    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        if t.untyped_storage().data_ptr() not in weights:
            saved[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(x)
    return sum(saved.values())


@pytest.mark.parametrize("kind", MODELS)
@pytest.mark.parametrize("planned", [False, True], ids=["every block", "planned"])
def test_checkpointed_step_matches_plain(kind: str, planned: bool) -> None:
    plain, lean = twins(kind)
    x, y = batch()
    if planned:
        plan = plan_activation_checkpointing(lean, x, target=0.3)
        assert plan.checkpointed, plan.summary()
        assert plan.segments[-1].name not in plan.checkpointed  # recomputed at once: nothing to gain
    else:
        assert enable_activation_checkpointing(lean) > 0
    torch.testing.assert_close(lean.state_dict(), plain.state_dict(), rtol=0, atol=0)  # calibration left no trace
    for model in (plain, lean):
        F.cross_entropy(model(x), y).backward()
    for (name, a), b in zip(plain.named_parameters(), lean.parameters()):
        torch.testing.assert_close(b.grad, a.grad, rtol=1e-5, atol=1e-5, msg=name)
    # BatchNorm running statistics move once per step, not again when a segment is recomputed
    torch.testing.assert_close(lean.state_dict(), plain.state_dict(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", MODELS)
def test_plan_saves_less_and_more_with_a_lower_target(kind: str) -> None:
    x, _ = batch()
    plain, loose = twins(kind)
    _, tight = twins(kind)
    loose_plan = plan_activation_checkpointing(loose, x, target=0.9)
    tight_plan = plan_activation_checkpointing(tight, x, target=0.2)
    assert len(tight_plan.checkpointed) > len(loose_plan.checkpointed)
    assert tight_plan.estimated_peak_share < loose_plan.estimated_peak_share <= 0.9
    assert saved_bytes(tight, x) < saved_bytes(loose, x) < saved_bytes(plain, x)
    assert all(cost.saved_bytes > 0 and cost.seconds > 0 for cost in tight_plan.segments)
    with torch.no_grad():  # eval and no_grad: plain forward, same output
        torch.testing.assert_close(tight.eval()(x), plain.eval()(x))


def test_a_given_plan_is_kept_and_bad_arguments_are_refused() -> None:
    first, second = twins("PlainUNet")
    plan = plan_activation_checkpointing(first, batch()[0], target=0.3)
    again = plan_activation_checkpointing(second, batch()[0], target=0.9, checkpointed=plan.checkpointed)
    assert again.checkpointed == plan.checkpointed
    with pytest.raises(ValueError, match="already set up on this PlainUNet"):
        enable_activation_checkpointing(first)
    with pytest.raises(ValueError, match="target must be in"):
        plan_activation_checkpointing(MODELS["MobileUNet"](), batch()[0], target=0.0)
    with pytest.raises(ValueError, match=r"no segments named \['up.9'\]"):
        plan_activation_checkpointing(MODELS["PlainUNet"](), batch()[0], checkpointed=["up.9"])


def test_training_with_checkpointing_logs_its_plan(tmp_path: Path) -> None:
    data = make_dataset(tmp_path / "data", train=4, val=2)
    config = TrainConfig(data_dir=str(data), spec_path=str(data / "spec.json"), out_dir=str(tmp_path / "run"),
                         model="PlainUNet", width=0.25, epochs=1, batch_size=2, crop=(32, 32), precision="fp32",
                         checkpointing=True, device="cpu")
    lines: list[str] = []
    train(config, log=lines.append)
    assert any(line.startswith("activation checkpointing: ") for line in lines), lines
    assert (tmp_path / "run" / "best.safetensors").is_file()


@pytest.mark.parametrize("native_bf16", [True, False])
def test_bf16_training_on_a_cpu_without_native_bf16_says_fp32_is_faster(tmp_path: Path, native_bf16: bool,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """bf16 is the default precision; on a CPU without AVX512-BF16/AMX it runs on slow reference kernels."""
    monkeypatch.setattr(loop, "bf16_is_fast", lambda device: native_bf16)  # the probe's answer on such a CPU
    data = make_dataset(tmp_path / "data", train=4, val=2)
    config = TrainConfig(data_dir=str(data), spec_path=str(data / "spec.json"), out_dir=str(tmp_path / "run"),
                         model="PlainUNet", width=0.25, epochs=1, batch_size=2, crop=(32, 32), precision="bf16",
                         device="cpu")
    lines: list[str] = []
    train(config, log=lines.append)
    noted = [line for line in lines if "no native bf16" in line]
    assert noted == ([] if native_bf16 else [
        "note: this CPU has no native bf16 convolutions (AVX512-BF16/AMX or a bf16 GPU): bf16 training runs slower "
        "than fp32 here; --precision fp32 is faster"]), lines
    assert (tmp_path / "run" / "best.safetensors").is_file()  # a note, not a refusal: it trains in bf16 all the same
