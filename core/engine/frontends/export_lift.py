"""Front end: a `torch.export` program (aten ops) lifted into the engine IR (nn modules + plain functions).

`torch.export` captures what torch.fx cannot (Python control flow on shapes, functional convolutions,
padding modules) as a flat graph of aten ops with the weights as inputs. The passes match layers, so
each weighted op becomes its module again (aten.conv2d -> nn.Conv2d, aten.batch_norm -> nn.BatchNorm2d,
...). Shapes read from the input stay in the graph (`dim_size`), so one lifted graph serves every size.
An aten op outside the vocabulary is kept as it is: it runs as a plain eager call and the plan names it.
"""
from __future__ import annotations

import torch
from torch import fx

from .channel_norm import lift_channel_layer_norms
from .export_lifter import Lifter
from .export_rules import RULES

aten = torch.ops.aten


def lift_exported_program(program: torch.export.ExportedProgram, source: str | None = "") -> fx.GraphModule:
    """The engine IR of an ExportedProgram (eval mode, one image in, one logits tensor out).

    `source`: the file the program came from, named in a size check's error ("": unnamed); None for leanseg's
    own capture of a module, whose size range can only come from a branch on the size."""
    program = program.run_decompositions({}) if _has_training_ops(program) else program
    graph_module = Lifter(program, RULES, source).run()
    lift_channel_layer_norms(graph_module)
    return graph_module


def _has_training_ops(program: torch.export.ExportedProgram) -> bool:
    return any(node.target is aten._native_batch_norm_legit_functional.default for node in program.graph.nodes)
