"""A network that came as a graph (`.pt2`, `.onnx`): its engine-IR GraphModule, padded and cropped.

The graph is the user's network as-is; this wrapper adds what leanseg's own models do themselves:
pad the input to the size multiple the network needs (bottom and right, zeros) and crop the logits
back, so any image size works. Normalisation stays outside, as for every model (ModelInfo mean/std).
"""
from __future__ import annotations

from torch import Tensor, fx, nn

from .padding import crop_like, pad_to_multiple


class GraphModel(nn.Module):
    """(1, C, H, W) -> (1, K, H, W) logits for any H, W: pad to `size_multiple`, run the graph, crop."""

    def __init__(self, net: fx.GraphModule, size_multiple: int = 32) -> None:
        super().__init__()
        if size_multiple < 1:
            raise ValueError(f"size_multiple must be >= 1, got {size_multiple}")
        self.net = net
        self.size_multiple = size_multiple

    def forward(self, x: Tensor) -> Tensor:
        padded = pad_to_multiple(x, self.size_multiple)  # (1, C, H', W'), H' and W' multiples
        return crop_like(self.net(padded), x)  # (1, K, H, W)
