"""Pass: channels_last weights, so CPU and CUDA convolutions need no hidden reorder buffers."""
from __future__ import annotations

import torch
from torch import fx

CHANNELS_LAST = torch.channels_last


def to_channels_last(graph_module: fx.GraphModule) -> int:
    """Store every 4-D parameter/buffer channels_last (NHWC in memory); returns how many changed.

    Activations follow: the executor hands the first convolution a channels_last input, and a
    channels_last weight keeps every later output channels_last.
    """
    changed = 0
    for tensor in list(graph_module.parameters()) + list(graph_module.buffers()):
        if tensor.dim() == 4 and not tensor.is_contiguous(memory_format=CHANNELS_LAST):
            tensor.data = tensor.data.contiguous(memory_format=CHANNELS_LAST)
            changed += 1
    return changed


def as_channels_last(value: object) -> object:
    """4-D floating tensors -> channels_last (a copy only when not already); others unchanged."""
    if isinstance(value, torch.Tensor) and value.dim() == 4 and value.is_floating_point():
        if not value.is_contiguous(memory_format=CHANNELS_LAST):
            return value.contiguous(memory_format=CHANNELS_LAST)
    return value
