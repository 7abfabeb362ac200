"""Exponential moving average of a model's weights (and BatchNorm statistics), as timm's ModelEmaV2."""
from __future__ import annotations

import copy

import torch
from torch import nn


class WeightAverage:
    """ema = d * ema + (1 - d) * current after each step, d = min(decay, (1 + n) / (10 + n)) so the
    first steps are not dominated by the random initial weights; integer buffers are copied."""

    def __init__(self, model: nn.Module, decay: float) -> None:
        self.decay = decay
        self.updates = 0
        self.model = copy.deepcopy(model).eval()
        for p in self.model.parameters():
            p.requires_grad_(False)

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        self.updates += 1
        d = min(self.decay, (1 + self.updates) / (10 + self.updates))
        current = model.state_dict()
        for name, average in self.model.state_dict().items():
            value = current[name].detach()
            if average.dtype.is_floating_point:
                average.mul_(d).add_(value, alpha=1 - d)
            else:
                average.copy_(value)

    def state_dict(self) -> dict:
        return {"updates": self.updates, "model": self.model.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.updates = int(state["updates"])
        self.model.load_state_dict(state["model"])
