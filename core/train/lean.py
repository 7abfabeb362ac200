"""Memory-lean training: activation checkpointing per block, autocast precision."""
from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from ..model.blocks import InvertedResidual
from ..model.mobile_unet import DecoderStage
from ..model.plain_unet import DoubleConv, UpStage

CHECKPOINTED_BLOCKS = (InvertedResidual, DecoderStage, DoubleConv, UpStage)


def enable_activation_checkpointing(model: nn.Module) -> int:
    """Make each block recompute its activations in backward (non-reentrant). Returns how many.

    Nested blocks (an InvertedResidual inside a DecoderStage) are wrapped once, at the outer
    level. Weights and state_dict keys are unchanged; only `forward` of the instances changes.
    """
    wrapped = 0
    covered: set[int] = set()
    for module in model.modules():
        if id(module) in covered or not isinstance(module, CHECKPOINTED_BLOCKS):
            continue
        covered.update(id(m) for m in module.modules())
        original = module.forward
        module.forward = functools.partial(_checkpointed, original)  # type: ignore[method-assign]
        wrapped += 1
    return wrapped


def _checkpointed(forward, *args):  # type: ignore[no-untyped-def]
    if not torch.is_grad_enabled():
        return forward(*args)
    return checkpoint(forward, *args, use_reentrant=False)


def autocast_for(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    """The autocast context for a precision word; fp16 only on CUDA."""
    if precision == "fp32":
        return contextlib.nullcontext()
    if precision == "fp16" and device.type != "cuda":
        raise ValueError("fp16 training needs CUDA; on the CPU use bf16 (this CPU has avx512_bf16) or fp32")
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device.type, dtype=dtype)


@contextlib.contextmanager
def eval_mode(model: nn.Module) -> Iterator[nn.Module]:
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)
