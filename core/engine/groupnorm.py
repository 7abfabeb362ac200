"""Pass: GroupNorm and the activation after it become one step that may normalise in place.

smp's FPN runs conv -> GroupNorm -> ReLU at stride 4 on 128 channels in every pyramid branch: 32 MB
maps at 1024x1024, and GroupNorm's output is a second one beside its input. Its statistics need the
whole map, but the normalisation is a per-channel scale and shift: where the executor sees that the
input dies at this step (no other reader, not the caller's), it scales the input in place.
"""
from __future__ import annotations

from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, fx, nn

from .capture import call_counts, module_of
from .fuse import ACTIVATIONS, absorb_activation


class GroupNormAct(nn.Module):
    """nn.GroupNorm then an in-place activation (or none); `forward_in_place` overwrites its input."""

    def __init__(self, norm: nn.GroupNorm, activation: str | None) -> None:
        super().__init__()
        self.norm = norm
        self.activation = activation

    def forward(self, x: Tensor) -> Tensor:
        norm = self.norm
        y = F.group_norm(x, norm.num_groups, norm.weight, norm.bias, norm.eps)
        return ACTIVATIONS[self.activation](y) if self.activation is not None else y

    def forward_in_place(self, x: Tensor) -> Tensor:
        """The same result written into `x` (which the caller no longer needs)."""
        norm = self.norm
        batch, channels = x.shape[:2]
        per_group = channels // norm.num_groups
        var, mean = torch.var_mean(x.unflatten(1, (norm.num_groups, per_group)).float(), dim=(2, 3, 4),
                                   correction=0)
        scale = (var + norm.eps).rsqrt().repeat_interleave(per_group, dim=1)  # (N, C)
        shift = -mean.repeat_interleave(per_group, dim=1) * scale
        if norm.affine:
            scale, shift = scale * norm.weight, shift * norm.weight + norm.bias
        x.mul_(scale.to(x.dtype).view(batch, channels, 1, 1)).add_(shift.to(x.dtype).view(batch, channels, 1, 1))
        return ACTIVATIONS[self.activation](x) if self.activation is not None else x

    def extra_repr(self) -> str:
        return f"activation={self.activation}"


def fuse_groupnorm_activation(graph_module: fx.GraphModule) -> int:
    """Every GroupNorm called once becomes a GroupNormAct, taking the activation that is its only reader;
    returns how many."""
    replaced = 0
    calls = call_counts(graph_module)
    for node in list(graph_module.graph.nodes):
        norm = module_of(graph_module, node)
        if not isinstance(norm, nn.GroupNorm) or calls[node.target] > 1 or len(node.args) != 1 or node.kwargs:
            continue
        absorb_activation(graph_module, node, partial(GroupNormAct, norm))
        replaced += 1
    graph_module.graph.eliminate_dead_code()
    graph_module.delete_all_unused_submodules()
    graph_module.recompile()
    return replaced
