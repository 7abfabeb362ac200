"""Front ends: bring a network, however it arrives, into the engine's one graph IR.

The IR is a `torch.fx.GraphModule` whose nodes use a small, fixed vocabulary (`ir.py` lists it):
standard `torch.nn` modules for layers that carry weights or state (Conv2d, BatchNorm2d, pooling,
activations) and plain functions for the rest (operator.add, torch.cat, F.interpolate, F.pad, ...).
The passes (fold, fuse, bands, head) match patterns in that vocabulary, never the front end's own
classes, so a torch.fx trace of an `nn.Module`, a `torch.export` program (`.pt2`) and an ONNX graph
(`.onnx`) get the same treatment.
"""
from .ir import IR_FUNCTIONS, IR_MODULES, FrontendError, dim_size

__all__ = ["IR_FUNCTIONS", "IR_MODULES", "FrontendError", "dim_size"]
