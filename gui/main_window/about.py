"""Help > About: versions of everything that matters and the devices found."""
from __future__ import annotations

import html
import platform
from importlib.metadata import PackageNotFoundError, version

import numpy as np
import torch

from leanseg.core.device import available_devices
from leanseg.core.model.catalog import display_name

from ..inference.worker import ModelStatus


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


def model_title(status: ModelStatus) -> str:
    """The file's name, after its card's name when the card names it otherwise ("Street U-Net (v3.onnx)")."""
    return display_name(status.path, str(status.info.provenance.get("name") or ""))


def about_text(model: ModelStatus | None) -> str:
    """Rich text for the About box."""
    import pyqtgraph
    import PySide6

    devices = ", ".join(available_devices())
    cuda = torch.version.cuda or "none (CPU build)"
    model_line = "none loaded"
    if model is not None:
        architecture = str(model.info.provenance.get("architecture") or "")
        model_line = html.escape(f"{model_title(model)} on {model.device}: {model.path}"
                                 + (f"; {architecture}" if architecture else ""))
    rows = [
        ("leanseg", _version("leanseg")),
        ("PyTorch", f"{torch.__version__} (CUDA {cuda})"),
        ("PySide6 / Qt", PySide6.__version__),
        ("pyqtgraph", pyqtgraph.__version__),
        ("NumPy", np.__version__),
        ("Python", platform.python_version()),
        ("Devices", devices),
        ("Model", model_line),
    ]
    table = "".join(f"<tr><td><b>{name}</b>&nbsp;&nbsp;</td><td>{value}</td></tr>" for name, value in rows)
    return ("<h3>leanseg</h3><p>U-Net segmentation with a memory-lean inference engine.</p>"
            f"<table>{table}</table>")
