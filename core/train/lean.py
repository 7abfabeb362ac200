"""Memory-lean training: autocast precision; activation checkpointing lives in `checkpointing`."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import nn

from .checkpointing import enable_activation_checkpointing as enable_activation_checkpointing


def autocast_for(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    """The autocast context for a precision word; fp16 only on CUDA."""
    if precision == "fp32":
        return contextlib.nullcontext()
    if precision == "fp16" and device.type != "cuda":
        raise ValueError("fp16 training needs CUDA; on the CPU use bf16 (fast where the CPU has AVX512-BF16 or AMX) "
                         "or fp32")
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
