"""Pass: a chain of row-local ops at the graph's tail (convs, resizes, per-pixel ops, crop) runs in row bands.

Decoders end in full-resolution work: smp's last U-Net block (upsample, two 3x3 convs, a 3x3 head),
FPN's head (3x3 conv, then a 4x bilinear upsample), LR-ASPP's bilinear upsample to the input size.
Each output row depends on a few rows of the chain's input, so the chain is run band by band: for a
band of output rows the rows each stage needs are worked out backwards (conv windows, resize source
rows), then computed forwards on those rows only, zero padding added where a band meets the image's
edge, and the band's argmax written out (fused-layer execution, Alwani et al. 2016). Full-size
intermediate maps and full-size logits never exist.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import Tensor, fx, nn

from ..model.padding import crop_like
from .band_pool import row_bands, run_bands
from .bands import BandedInvertedResidual
from .capture import module_of
from .frontends.channel_norm import ChannelLayerNorm
from .fuse import ConvAct
from .head import labels_dtype
from .resize_labels import resized_labels
from .row_resize import Resize
from .virtual import Part, conv_output_size, virtual_rows, virtual_size

DEFAULT_BAND_BYTES = 4 * 2**20  # the band's stage tensors together
MIN_BAND_ROWS = 48  # each band recomputes its conv halos: fewer rows, more repeated work (16: +12% time)
POINTWISE = (nn.BatchNorm2d, nn.ReLU, nn.ReLU6, nn.Hardtanh, nn.Hardswish, nn.Hardsigmoid, nn.SiLU, nn.GELU,
             nn.Sigmoid, nn.Tanh, nn.LeakyReLU, nn.Identity, ChannelLayerNorm)


class BandedChain(nn.Module):
    """(1, C, h, w) -> labels (1, H, W) or logits (1, K, H, W) through `stages`, band of output rows by band.

    forward(source, *sizes, reference): `sizes` are the (height, width) pairs of the resizes that take a
    size, in order; `reference` is the tensor a final crop matches (when `crop`). `emit` is set by the
    executor before each run: 'labels' or 'logits'. An `interior` chain (inside the network, e.g. a
    ResNet stem) always emits its whole output, channels_last, for the steps after it.
    """

    def __init__(self, stages: list[nn.Module], sized: list[bool], crop: bool, sources: int = 1,
                 interior: bool = False) -> None:
        super().__init__()
        self.interior = interior
        self.stages = nn.ModuleList(stages)
        self.sources = sources  # >1: the first stage is a conv over a virtual concatenation of these inputs
        self.sized = sized  # per stage: a Resize that takes its size as an argument
        self.crop = crop
        self.emit = "labels"
        self.band_bytes = DEFAULT_BAND_BYTES
        self.min_rows = MIN_BAND_ROWS
        self.transient_bytes = 0
        self.parallel_bands = True

    def forward(self, *args: Any) -> Tensor:
        tensors: tuple[Tensor, ...] = tuple(args[:self.sources])
        source = tensors[0]
        extra = list(args[self.sources:])
        reference = extra.pop() if self.crop else None
        sizes = iter(zip(extra[0::2], extra[1::2]))
        first = self.stages[0]
        if isinstance(first, BandedInvertedResidual):
            shapes = [virtual_size(tensors, first.parts, first.producers)]  # (C, H, W) entering each stage
        else:
            shapes = [(source.shape[1], source.shape[2], source.shape[3])]
        for stage, sized in zip(self.stages, self.sized):
            channels, height, width = shapes[-1]
            if isinstance(stage, BandedInvertedResidual):
                conv = stage.depthwise.conv
                shapes.append((conv.out_channels, *conv_output_size(conv, height, width)))
            elif isinstance(stage, ConvAct):
                shapes.append((stage.conv.out_channels, *conv_output_size(stage.conv, height, width)))
            elif isinstance(stage, Resize):
                shapes.append((channels, *stage.output_size(height, width, next(sizes) if sized else None)))
            elif isinstance(stage, nn.MaxPool2d):
                shapes.append((channels, *conv_output_size(_pool_geometry(stage), height, width)))
            else:
                shapes.append(shapes[-1])
        classes, height, width = shapes[-1]
        if reference is not None:
            height, width = min(height, reference.shape[2]), min(width, reference.shape[3])
        labels = self.emit == "labels" and not self.interior
        if labels:
            out = torch.empty((1, height, width), dtype=labels_dtype(classes), device=source.device)
        else:
            out = torch.empty((1, classes, height, width), dtype=source.dtype, device=source.device,
                              memory_format=torch.channels_last)
        row_bytes = sum(c * w * source.element_size() * max(1.0, h / max(1, height)) for c, h, w in shapes)
        rows = max(1, min(height, max(self.min_rows, int(self.band_bytes // max(1.0, row_bytes)))))

        def run_band(top: int, bottom: int) -> int:
            band, held = self._band(tensors, shapes, top, bottom, out.dtype if labels else None)
            band = band[..., :width]
            gave_labels = labels and band.dim() == 3  # the last resize gave labels (resize_labels)
            argmax_bytes = band[:, 0].numel() * 8 if labels and not gave_labels else 0  # argmax's int64 indices
            if band.is_meta:
                pass
            elif gave_labels:
                out[:, top:bottom] = band
            elif labels:
                out[:, top:bottom] = band.argmax(1)
            else:
                out[:, :, top:bottom] = band
            return held + argmax_bytes

        self.transient_bytes = run_bands(run_band, row_bands(height, rows), source.device, self.parallel_bands)
        return out

    def _band(self, tensors: tuple[Tensor, ...], shapes: list[tuple[int, int, int]], top: int,
              bottom: int, labels: torch.dtype | None = None) -> tuple[Tensor, int]:
        """Rows [top, bottom) of the last stage's output, and the bytes of the band tensors made. With a
        `labels` dtype and a resize last, that resize gives the rows' labels (1, rows, W) instead."""
        count = len(self.stages)
        out_rows: list[tuple[int, int]] = [(0, 0)] * count  # rows each stage computes (inside its output)
        in_rows: list[tuple[int, int]] = [(0, 0)] * count  # rows each stage reads (may reach into padding)
        a, b = top, bottom
        for index in range(count - 1, -1, -1):
            stage = self.stages[index]
            a, b = max(a, 0), min(b, shapes[index + 1][1])
            out_rows[index] = (a, b)
            if isinstance(stage, (ConvAct, BandedInvertedResidual, nn.MaxPool2d)):
                window = _window_of(stage)
                span = window.dilation[0] * (window.kernel_size[0] - 1)
                pad = int(window.padding[0])
                a, b = a * window.stride[0] - pad, (b - 1) * window.stride[0] - pad + span + 1
            elif isinstance(stage, Resize):
                first, second, _ = stage.source_coordinates(range(a, b), shapes[index][1], shapes[index + 1][1])
                a, b = min(first), max(second) + 1
            in_rows[index] = (a, b)
        offset = max(in_rows[0][0], 0)
        opening = self.stages[0]
        if isinstance(opening, BandedInvertedResidual):  # rows of the concatenation, built for this band
            x, peak = virtual_rows(tensors, opening.parts, offset, min(in_rows[0][1], shapes[0][1]), opening.producers)
            current = 0 if len(tensors) == 1 and opening.parts[0] == Part() else _nbytes(x)
        else:
            x, peak, current = tensors[0][:, :, offset:min(in_rows[0][1], shapes[0][1])], 0, 0  # a view
        for index, stage in enumerate(self.stages):
            lo, hi = in_rows[index]
            in_h = shapes[index][1]
            if isinstance(stage, (ConvAct, BandedInvertedResidual)):
                conv_act = stage if isinstance(stage, ConvAct) else stage.depthwise
                pad_top, pad_bottom = max(0, -lo), max(0, hi - in_h)
                if pad_top or pad_bottom:
                    x = F.pad(x, (0, 0, pad_top, pad_bottom)) if not x.is_meta else \
                        x.new_empty((x.shape[0], x.shape[1], x.shape[2] + pad_top + pad_bottom, x.shape[3]))
                    peak, current = max(peak, current + _nbytes(x)), _nbytes(x)
                x = conv_act(x, padding=(0, conv_act.conv.padding[1]))  # type: ignore[index]
            elif isinstance(stage, nn.MaxPool2d):
                x, made = _pooled_rows(stage, x, lo, hi, in_h)
                peak = max(peak, current + made)
            elif isinstance(stage, Resize):
                out_h, out_w = shapes[index + 1][1], shapes[index + 1][2]
                if labels is not None and index == count - 1:
                    x, made = resized_labels(stage, x, offset, range(*out_rows[index]), in_h, out_h, out_w, labels)
                    return x, max(peak, current + made)
                x = stage.rows(x, offset, range(*out_rows[index]), in_h, out_h, out_w)
            else:
                x = stage(x)
            offset = out_rows[index][0]
            peak, current = max(peak, current + _nbytes(x)), _nbytes(x)  # a stage's input and output together
        return x, peak

    def extra_repr(self) -> str:
        return f"crop={self.crop}"


@dataclass(frozen=True)
class Window:
    """A sliding window's geometry per axis (height, width): what maps output rows to input rows."""

    kernel_size: tuple[int, int]
    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int]


def _window_of(stage: nn.Module) -> Window:
    """The window of a conv stage (its depthwise conv for a banded block) or of a max pool."""
    if isinstance(stage, nn.MaxPool2d):
        return _pool_geometry(stage)
    assert isinstance(stage, (ConvAct, BandedInvertedResidual))
    conv = stage.conv if isinstance(stage, ConvAct) else stage.depthwise.conv
    return Window(conv.kernel_size, conv.stride, cast(tuple[int, int], conv.padding), conv.dilation)  # type: ignore[arg-type]


def _pool_geometry(pool: nn.MaxPool2d) -> Window:
    pair = nn.modules.utils._pair
    return Window(pair(pool.kernel_size), pair(pool.stride or pool.kernel_size), pair(pool.padding),
                  pair(pool.dilation))


def _pooled_rows(pool: nn.MaxPool2d, x: Tensor, lo: int, hi: int, in_h: int) -> tuple[Tensor, int]:
    """Max-pool a band holding input rows [max(lo, 0), min(hi, in_h)); rows beyond the edge are the -inf
    padding the pool's own padding adds. Returns the pooled rows and the bytes of the padded band."""
    geometry = _pool_geometry(pool)
    pad_top, pad_bottom = max(0, -lo), max(0, hi - in_h)
    made = 0
    if pad_top or pad_bottom:
        if x.is_meta:
            x = x.new_empty((x.shape[0], x.shape[1], x.shape[2] + pad_top + pad_bottom, x.shape[3]))
        else:
            x = F.pad(x, (0, 0, pad_top, pad_bottom), value=float("-inf"))
        made = _nbytes(x)
    pooled = F.max_pool2d(x, geometry.kernel_size, geometry.stride, (0, geometry.padding[1]), geometry.dilation)
    return pooled, made


def _nbytes(tensor: Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def _stage_of(graph_module: fx.GraphModule, node: fx.Node) -> tuple[nn.Module, list[Any]] | None:
    """(stage module, size arguments) when `node` can be a chain stage, else None."""
    module = module_of(graph_module, node)
    if isinstance(module, ConvAct) and isinstance(module.conv.padding, tuple) and module.conv.groups >= 1:
        return module, []
    if isinstance(module, BandedInvertedResidual) and module.expand is None and module.project is None \
            and not module.residual:
        return module, []  # a conv over a (virtual) concatenation: it starts the chain
    if isinstance(module, POINTWISE):
        return module, []
    found = resize_of(node)
    return (found[0], list(found[1]) if found[1] is not None else []) if found is not None else None


def resize_of(node: fx.Node) -> tuple[Resize, tuple[Any, Any] | None] | None:
    """An F.interpolate node (nearest or bilinear, by a scale or to a size) as a Resize stage and its size
    arguments (None for a scale), else None."""
    if node.op != "call_function" or node.target is not F.interpolate or len(node.args) != 1:
        return None
    mode = str(node.kwargs.get("mode", "nearest"))
    align = bool(node.kwargs.get("align_corners") or False)
    if mode not in ("nearest", "bilinear") or node.kwargs.get("antialias") or node.kwargs.get("recompute_scale_factor"):
        return None
    if set(node.kwargs) - {"mode", "align_corners", "size", "scale_factor", "antialias", "recompute_scale_factor"}:
        return None
    size, scale = node.kwargs.get("size"), node.kwargs.get("scale_factor")  # type: Any, Any
    if size is not None:
        if not isinstance(size, (tuple, list)) or len(size) != 2:
            return None
        return Resize(mode, align, None), (size[0], size[1])
    if scale is None:
        return None
    scales = tuple(float(s) for s in scale) if isinstance(scale, (tuple, list)) else (float(scale),) * 2
    return Resize(mode, align, (scales[0], scales[1])), None


def banded_tail(graph_module: fx.GraphModule, min_convs: int = 0) -> int:
    """Replace the longest chain of stages ending at the graph's output by one BandedChain; its length
    (0, the graph unchanged, when the chain holds fewer than `min_convs` convs)."""
    graph = graph_module.graph
    output = next(node for node in graph.nodes if node.op == "output")
    tail = output.args[0]
    if not isinstance(tail, fx.Node) or list(tail.users) != [output]:
        return 0
    reference = None
    if tail.op == "call_function" and tail.target is crop_like:
        reference, tail = tail.args[1], tail.args[0]
        if not isinstance(tail, fx.Node) or len(tail.users) != 1:
            return 0
    chain: list[tuple[fx.Node, nn.Module, list[Any]]] = []
    node: Any = tail
    while isinstance(node, fx.Node):
        stage = _stage_of(graph_module, node)
        if stage is None or (chain and len(node.users) != 1):
            break
        chain.append((node, *stage))
        if isinstance(stage[0], BandedInvertedResidual):
            break
        node = node.args[0]
    if not chain or not any(isinstance(m, (ConvAct, Resize)) for _, m, _ in chain):
        return 0
    if sum(isinstance(m, (ConvAct, BandedInvertedResidual)) for _, m, _ in chain) < min_convs:
        return 0
    chain.reverse()
    sources = list(chain[0][0].args) if isinstance(chain[0][1], BandedInvertedResidual) else [chain[0][0].args[0]]
    sizes = [value for _, _, size in chain for value in size]
    name = f"{chain[-1][0].name}_banded_tail"
    module = BandedChain([m for _, m, _ in chain], [bool(size) for _, _, size in chain], crop=reference is not None,
                         sources=len(sources))
    graph_module.add_submodule(name, module)
    with graph.inserting_before(output):
        args = (*sources, *sizes, reference) if reference is not None else (*sources, *sizes)
        banded = graph.call_module(name, args)
    output.args = (banded,)
    graph.eliminate_dead_code()
    graph_module.delete_all_unused_submodules()
    graph_module.recompile()
    return len(chain)
