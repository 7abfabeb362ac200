"""Segmentation models: MobileUNet (inverted residuals) and PlainUNet (classic)."""
from __future__ import annotations

from torch import nn

from .config import MobileUNetConfig, ModelConfig, PlainUNetConfig, config_from_dict, config_to_dict
from .mobile_unet import MobileUNet
from .plain_unet import PlainUNet

__all__ = [
    "MobileUNet",
    "MobileUNetConfig",
    "ModelConfig",
    "PlainUNet",
    "PlainUNetConfig",
    "build_model",
    "config_from_dict",
    "config_to_dict",
]


def build_model(config: ModelConfig) -> nn.Module:
    """The model a config describes, with freshly initialised weights."""
    if isinstance(config, MobileUNetConfig):
        return MobileUNet(config)
    if isinstance(config, PlainUNetConfig):
        return PlainUNet(config)
    raise TypeError(f"unknown model config {type(config).__name__}; valid: MobileUNetConfig, PlainUNetConfig")
