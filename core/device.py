"""Choose a torch device from a user's word for it, with errors that say what exists."""
from __future__ import annotations

import torch


def available_devices() -> list[str]:
    """'cpu' and each CUDA device found, e.g. ['cpu', 'cuda:0']."""
    names = ["cpu"]
    if torch.cuda.is_available():
        names += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    return names


def resolve_device(name: str) -> torch.device:
    """'auto' (CUDA if present, else CPU), 'cpu', 'cuda' or 'cuda:N'."""
    name = name.strip().lower()
    if name == "auto":
        return torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ValueError(
                f"device {name!r} asked for, but CUDA is not available here (torch {torch.__version__}, "
                f"built {'with' if torch.version.cuda else 'without'} CUDA); use --device cpu, or install "
                "a CUDA build of torch: make torch TORCH_INDEX=https://download.pytorch.org/whl/cu126"
            )
        device = torch.device(name if ":" in name else "cuda:0")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ValueError(f"device {name!r} does not exist; available: {available_devices()}")
        return device
    raise ValueError(f"unknown device {name!r}; valid: auto, cpu, cuda, cuda:N (found {available_devices()})")


def bf16_is_fast(device: torch.device) -> bool:
    """Whether bf16 convolutions run natively: a CUDA GPU that supports bf16, or a CPU with AVX512-BF16/AMX
    (oneDNN's bf16 kernels); elsewhere bf16 falls back to slow reference code."""
    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported())
    if device.type == "cpu":
        supported = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
        return bool(torch.backends.mkldnn.is_available() and supported is not None and supported())
    return False
