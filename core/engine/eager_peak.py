"""Peak bytes of a plain PyTorch (eager) forward, for tiling a model the engine does not run.

The model's own forward runs on a meta copy (shapes only: nothing computed, nothing allocated) under a
dispatch mode that counts each storage from the op that makes it until Python drops its last tensor. So the
count holds what eager holds, a `forward`'s locals included, which a graph's last-use lifetimes miss (on
MobileUNet at 512 px, a fifth of the measured peak). A convolution wider than 1x1 counts the blocked-layout copies
oneDNN makes of its output and, past 16 channels, of its input while it runs (`convolution_buffers`).

In bf16 the replay runs the meta copy in bfloat16, as autocast runs a convolution network (autocast does
nothing to meta tensors): the input's bf16 copy, bf16 activations, and the logits cast back to float32.
"""
from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from .accounting import LiveAccount, storage_key, tensors_in
from .graph_lock import GRAPH_LOCK
from .shapes import meta_copy


class LiveStorageBytes(TorchDispatchMode):
    """Under it, `account.live_bytes` is the bytes of the storages its ops made that a tensor still holds (each
    tensor released when Python drops it), and `peak` the most that and a convolution's transient buffers reached.
    The storages of `external` (weights, the caller's input) and the views of them its ops make are not counted."""

    def __init__(self, external: list[torch.Tensor]) -> None:
        super().__init__()
        self.account = LiveAccount()
        for tensor in external:
            self.account.mark_external(tensor)
        self.peak = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for tensor in tensors_in(out):
            self.account.hold(tensor)
            weakref.finalize(tensor, self.account.release_storage, storage_key(tensor))
        transient = convolution_buffers(args[0], args[1], out) if func in _CONVOLUTIONS else 0
        self.peak = max(self.peak, self.account.live_bytes + transient)
        return out


def eager_forward_peak(model: nn.Module, input_shape: tuple[int, ...], bf16: bool = False) -> int:
    """Peak bytes of `model(x)` run eagerly in inference mode (bf16: under autocast, the logits returned as
    float32), above the float32 input x, which the caller holds."""
    meta = meta_copy(model)
    if bf16:
        meta = meta.to(torch.bfloat16)
    x = torch.empty(input_shape, device="meta")
    held = [x, *meta.parameters(), *meta.buffers()]
    with GRAPH_LOCK, torch.inference_mode(), LiveStorageBytes(held) as counter:  # a model run: no trace meanwhile
        if bf16:
            meta(x.to(torch.bfloat16)).float()
        else:
            meta(x)
    return counter.peak


def eager_peak_estimator(model: nn.Module, in_channels: int, bf16: bool = False,
                         probe_px: int = 128) -> Callable[[tuple[int, ...]], int]:
    """A stand-in for Plan.estimate_peak when only the eager model runs: input shape -> bytes.

    Replays the forward once at probe_px x probe_px (eager_forward_peak), then scales linearly with the pixel
    count, as the activations of a fully convolutional net do (measured on MobileUNet: the same bytes per pixel
    at 256 and at 1024 px)."""
    per_pixel = eager_forward_peak(model, (1, in_channels, probe_px, probe_px), bf16) / probe_px**2

    def estimate(input_shape: tuple[int, ...]) -> int:
        return int(per_pixel * input_shape[-2] * input_shape[-1])

    return estimate


def convolution_buffers(x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor) -> int:
    """Bytes a CPU convolution holds beside its input and output while it runs (oneDNN, measured with AVX-512 on
    PlainUNet's and MobileUNet's convolutions): none for a 1x1; else its output in a blocked layout, channels
    padded to 16, and for 16 input channels or more, the input reordered the same way, past the output's size."""
    if weight.shape[-2:] == (1, 1):
        return 0
    out_channels, in_channels = out.shape[1], x.shape[1]
    blocked_out = _nbytes(out) * _pad16(out_channels) // out_channels
    blocked_in = _nbytes(x) * _pad16(in_channels) // in_channels if in_channels >= 16 else 0
    return blocked_out + max(blocked_in - _nbytes(out), 0)


def _pad16(channels: int) -> int:
    return -(-channels // 16) * 16


# In inference mode a convolution reaches the dispatch mode as aten.conv2d (no autograd layer decomposes it);
# `padding="same"` is its own overload.
_CONVOLUTIONS = {torch.ops.aten.conv2d.default, torch.ops.aten.conv2d.padding, torch.ops.aten.convolution.default}


def _nbytes(value: object) -> int:
    return value.numel() * value.element_size() if isinstance(value, torch.Tensor) else 0
