"""Pass: inverted-residual blocks (1x1 expand -> kxk depthwise -> 1x1 project [+ x]) in row bands,
so the expanded tensor (t times the input's channels) never exists whole: only a band of it does.
The same module runs any kxk conv in bands when its input is a virtual concatenation (virtual.py)."""
from __future__ import annotations

import operator
from collections.abc import Callable
from functools import partial
from typing import cast

import torch
import torch.nn.functional as F
from torch import Tensor, fx, nn

from .band_pool import EDGE_BANDS, row_bands, run_bands
from .capture import module_of, single_user
from .fuse import ConvAct
from .layout import CHANNELS_LAST
from .row_resize import upsampled_rows
from .virtual import Part, upsample_part, virtual_rows, virtual_size

DEFAULT_BAND_BYTES = 2 * 2**20  # expanded rows per band: small enough to stay in cache
# ... but at least this many output rows: each band re-expands the k - 1 input rows it shares with its
# neighbours, 2/3 of the expand work again in 3-row bands (2 MB of a 4096-wide image), 1/4 in 8. More
# rows are faster still (16: another 15%) but hold more: 8 adds 6% to the peak at 1024 (16: 29%).
MIN_BAND_ROWS = 8

RowReader = Callable[[int, int], tuple[Tensor, int]]  # (first, last) -> input rows [first, last), bytes made


class BandedInvertedResidual(nn.Module):
    """(1, Cin, H, W) -> (1, Cout, H', W'), computed band of output rows by band of output rows.

    Each band expands only the input rows its depthwise window reads (a halo of k // 2 rows),
    zero-pads at the image's top and bottom as the depthwise's own padding would, then projects
    and adds the residual straight into the preallocated output. `expand` and `project` are
    optional: with neither it is a plain kxk conv, worth banding when its input is virtual
    (`parts`: the input is the concatenation of the node's arguments, some upsampled).
    """

    def __init__(self, expand: ConvAct | None, depthwise: ConvAct, project: ConvAct | None, residual: bool) -> None:
        super().__init__()
        self.parts: tuple[Part, ...] = (Part(),)  # how the node's arguments form the input
        self.producers = nn.ModuleList()  # convs the parts recompute band by band (Part.producer)
        self.addend: Part | None = None  # set: expand(input) + this upsampled second argument (an FPN merge)
        self.expand = expand
        self.depthwise = depthwise
        self.project = project
        self.residual = residual
        self.band_bytes = DEFAULT_BAND_BYTES  # the memory budget may lower it
        self.min_rows = MIN_BAND_ROWS  # a memory budget that lowers band_bytes lowers this to 1
        self.transient_bytes = 0  # bytes of band temporaries held at once in the last call
        self.parallel_bands = True  # CPU: bands on parallel single-threaded workers (see band_pool)
        conv = depthwise.conv
        padding = cast(tuple[int, int], conv.padding)
        self._stride, self._dilation = conv.stride[0], conv.dilation[0]
        self._pad, self._kernel = padding[0], conv.kernel_size[0]
        self._width_padding = (0, padding[1])
        self.hidden_channels = conv.in_channels
        # (left, right, top, bottom): a zero pad the graph applies before the depthwise (EfficientNet's static
        # "same" padding, asymmetric at stride 2); each band pads the rows and columns it reads instead
        self.zero_pad: tuple[int, int, int, int] | None = None

    def output_size(self, height: int, width: int) -> tuple[int, int]:
        conv = self.depthwise.conv
        span = self._dilation * (self._kernel - 1) + 1
        if self.zero_pad is not None:
            left, right, top, bottom = self.zero_pad
            span_w = conv.dilation[1] * (conv.kernel_size[1] - 1) + 1
            return ((height + top + bottom - span) // self._stride + 1,
                    (width + left + right - span_w) // conv.stride[1] + 1)
        out_h = (height + 2 * self._pad - span) // self._stride + 1
        out_w = (width + 2 * self._width_padding[1] - conv.dilation[1] * (conv.kernel_size[1] - 1) - 1) \
            // conv.stride[1] + 1
        return out_h, out_w

    def rows_per_band(self, width: int, out_height: int, itemsize: int) -> int:
        """Output rows per band so one band of the expanded tensor takes about `band_bytes`, and at least
        `min_rows` (where the image has them)."""
        row_bytes = self.hidden_channels * width * itemsize * self._stride
        return max(1, min(out_height, max(self.min_rows, self.band_bytes // max(1, row_bytes))))

    def forward(self, *inputs: Tensor) -> Tensor:  # (1, Cin, H, W) -> (1, Cout, H', W')
        x = inputs[0]
        _, height, width = virtual_size(inputs[:1] if self.addend is not None else inputs, self.parts, self.producers)
        out_h, out_w = self.output_size(height, width)
        last_conv = (self.project or self.depthwise).conv
        shape = (x.shape[0], last_conv.out_channels, out_h, out_w)
        if self.residual:
            out = x.clone(memory_format=CHANNELS_LAST)  # each band's projection is added into it
        elif self.project is not None:
            out = torch.empty(shape, dtype=x.dtype, device=x.device, memory_format=CHANNELS_LAST).zero_()
        else:
            out = torch.empty(shape, dtype=x.dtype, device=x.device, memory_format=CHANNELS_LAST)
        rows = self.rows_per_band(width, out_h, x.element_size())

        def run_band(top: int, bottom: int) -> int:
            band, band_bytes = self._depthwise_band(inputs, height, top, bottom)  # (1, hidden, bottom - top, W')
            if self.project is not None:
                return band_bytes + self._add_projection(out[:, :, top:bottom], band)
            out[:, :, top:bottom] = band
            return band_bytes

        self.transient_bytes = run_bands(run_band, row_bands(out_h, rows), x.device, self.parallel_bands)
        return out

    def forward_in_place(self, *inputs: Tensor) -> Tensor:
        """x + block(x) (a stride-1 residual block), or depthwise(x) (a depthwise alone), written into x, which
        the caller no longer needs.

        Each band adds its projection into its own rows of x once it has computed it; the rows a band's
        window reads across a band boundary are copied before any band runs (`pad` rows each side of
        each boundary), so bands may run in any order, in parallel, and still read the input as it was.
        """
        x = inputs[0]
        adds_into_input = self.residual and self.project is not None
        replaces_input = not self.residual and self.expand is None and self.project is None  # a depthwise alone
        if (not (adds_into_input or replaces_input) or self._stride != 1 or self.parts != (Part(),)
                or self.zero_pad is not None
                or self.addend is not None or len(inputs) != 1 or not x.is_contiguous(memory_format=CHANNELS_LAST)
                or self.output_size(x.shape[2], x.shape[3]) != tuple(x.shape[2:])):
            return self.forward(*inputs)
        height, width = x.shape[2], x.shape[3]
        if replaces_input:
            return self._depthwise_over_input(x)
        bands = row_bands(height, self.rows_per_band(width, height, x.element_size()))
        halo = self._pad
        edges = {top: x[:, :, max(0, top - halo):top + halo].clone(memory_format=CHANNELS_LAST)
                 for top, _ in bands[1:]}  # rows around each boundary, as they were
        edge_bytes = sum(edge.untyped_storage().nbytes() for edge in edges.values())

        def read_rows(top: int, bottom: int, first: int, last: int) -> tuple[Tensor, int]:
            """Input rows [first, last) as they were, for the band that owns rows [top, bottom)."""
            pieces = []
            if first < top:  # a neighbour's rows above: from the copy around this band's top
                start = max(0, top - halo)
                pieces.append(edges[top][:, :, first - start:top - start])
            pieces.append(x[:, :, max(first, top):min(last, bottom)])  # the band's own rows: still as they were
            if last > bottom:  # ... and below
                start = max(0, bottom - halo)
                pieces.append(edges[bottom][:, :, bottom - start:last - start])
            if len(pieces) == 1:
                return pieces[0], 0
            rows = torch.cat(pieces, dim=2)
            return rows, rows.untyped_storage().nbytes()

        def run_band(top: int, bottom: int) -> int:
            band, band_bytes = self._depthwise_band(inputs, height, top, bottom, partial(read_rows, top, bottom))
            if self.project is not None:
                return band_bytes + self._add_projection(x[:, :, top:bottom], band)
            if not x.is_meta:
                x[:, :, top:bottom] = band
            return band_bytes

        self.transient_bytes = edge_bytes + run_bands(run_band, bands, x.device, self.parallel_bands)
        return x

    def _add_projection(self, target: Tensor, band: Tensor) -> int:
        """target += project(band), written straight into `target` when the projection has no activation
        (MobileNet's linear bottleneck); an activated projection (a separable conv's pointwise + ReLU, as in
        DeepLabV3+) is computed for the band, then added. Returns the bytes of temporaries made."""
        assert self.project is not None
        if self.project.activation is None:
            self.project.add_into(target, band)
            return 0
        projected = self.project(band)
        if not target.is_meta:
            target += projected
        return projected.untyped_storage().nbytes()

    def _depthwise_over_input(self, x: Tensor) -> Tensor:
        """A lone depthwise conv written into its input, band after band, each band's rows written once the
        next band (which reads the last `pad` of them) is computed: two bands of output held, no copies."""
        height, width = x.shape[2], x.shape[3]
        # Twice the usual rows: each band is one small conv with its thread hand-offs (LR-ASPP's 960-channel
        # blocks at 1024: 8 rows cost 16% of the model's time over a whole-map conv, 16 rows 9%).
        rows = min(height, 2 * self.rows_per_band(width, height, x.element_size()))
        bands = row_bands(height, max(self._pad, rows))
        sizes: dict[int, int] = {}
        pending: tuple[int, int, Tensor] | None = None
        for index, (top, bottom) in enumerate(bands):
            if x.is_meta and EDGE_BANDS < index < len(bands) - EDGE_BANDS:
                continue  # estimate: bands away from the edges all hold what the first of them does
            band, sizes[index] = self._depthwise_band((x,), height, top, bottom)  # rows above: not yet written
            if pending is not None and not x.is_meta:
                x[:, :, pending[0]:pending[1]] = pending[2]
            pending = (top, bottom, band)
        if pending is not None and not x.is_meta:
            x[:, :, pending[0]:pending[1]] = pending[2]
        held = [sizes.get(index, sizes.get(EDGE_BANDS, 0)) for index in range(len(bands))]
        self.transient_bytes = max((a + b for a, b in zip(held, held[1:], strict=False)), default=sum(held))
        return x

    def _depthwise_band(self, inputs: tuple[Tensor, ...], height: int, top: int, bottom: int,
                        read_rows: RowReader | None = None) -> tuple[Tensor, int]:
        """Depthwise output rows [top, bottom), expanding only the input rows they read (through `read_rows`
        when given); and the bytes of temporaries made for them."""
        if self.zero_pad is not None:
            return self._zero_padded_band(inputs, height, top, bottom)
        stride, pad = self._stride, self._pad
        span = self._dilation * (self._kernel - 1) + 1
        first = top * stride - pad  # first input row the band's window reads (may be padding)
        last = (bottom - 1) * stride - pad + span
        if first >= 0 and last <= height:  # interior: the window never reaches the zero padding
            skip, padding = 0, self._width_padding
        else:  # at an edge: the conv pads rows itself; drop the `skip` output rows before `top`
            skip = top if first < 0 else -(-pad // stride)
            first, padding = (top - skip) * stride, (pad, self._width_padding[1])
        if self.addend is not None:
            return self._merged_band(inputs, height, first, min(last, height), padding, skip, bottom - top)
        expanded, building_bytes, made_bytes = self._expanded_rows(inputs, first, min(last, height), read_rows)
        band = self.depthwise(expanded, padding=padding)[:, :, skip:skip + bottom - top]
        made_bytes = max(building_bytes, made_bytes + band.untyped_storage().nbytes())
        return band, made_bytes

    def _expanded_rows(self, inputs: tuple[Tensor, ...], first: int, last: int,
                       read_rows: RowReader | None = None) -> tuple[Tensor, int, int]:
        """Input rows [first, last) (through `read_rows` when given), expanded; with the bytes held while the
        rows were built and the bytes of the temporaries made."""
        if read_rows is not None:
            rows, building_bytes = read_rows(first, last)
            made_bytes = building_bytes
        else:
            rows, building_bytes = virtual_rows(inputs, self.parts, first, last, self.producers)
            made_bytes = 0 if self.parts == (Part(),) else rows.untyped_storage().nbytes()  # else a view
        if self.expand is None:
            return rows, building_bytes, made_bytes
        expanded = self.expand(rows)
        return expanded, building_bytes, made_bytes + expanded.untyped_storage().nbytes()

    def _zero_padded_band(self, inputs: tuple[Tensor, ...], height: int, top: int, bottom: int) -> tuple[Tensor, int]:
        """Depthwise output rows [top, bottom) behind an explicit zero pad: the input rows the band reads,
        expanded, padded with the zero rows and columns of the pad that fall in the band, then convolved with
        no padding of its own."""
        left, right, pad_top, _ = self.zero_pad  # type: ignore[misc]
        span = self._dilation * (self._kernel - 1) + 1
        first = top * self._stride - pad_top  # in input rows; rows < 0 or >= height are the pad's zeros
        last = (bottom - 1) * self._stride - pad_top + span
        low, high = max(first, 0), min(last, height)
        expanded, building_bytes, made_bytes = self._expanded_rows(inputs, low, high)
        padded = F.pad(expanded, (left, right, low - first, last - high))
        band = self.depthwise(padded, padding=(0, 0))
        made_bytes += padded.untyped_storage().nbytes() + band.untyped_storage().nbytes()
        return band, max(building_bytes, made_bytes)

    def _merged_band(self, inputs: tuple[Tensor, ...], height: int, first: int, last: int,
                     padding: tuple[int, int], skip: int, count: int) -> tuple[Tensor, int]:
        """Depthwise-slot conv over rows [first, last) of upsample(inputs[1]) + expand(inputs[0]): the
        merged map is built band by band, the 1x1 conv writing straight into the upsampled rows."""
        assert self.addend is not None and self.addend.scale is not None and self.expand is not None
        if inputs[0].is_meta:
            channels = self.expand.conv.out_channels
            merged = inputs[0].new_empty((1, channels, last - first, inputs[0].shape[3]))
        else:
            merged = upsampled_rows(inputs[1], first, last, self.addend.scale, self.addend.mode)
            merged = merged.contiguous(memory_format=CHANNELS_LAST)
            self.expand.add_into(merged, inputs[0][:, :, first:last])
        band = self.depthwise(merged, padding=padding)[:, :, skip:skip + count]
        return band, merged.untyped_storage().nbytes() + band.untyped_storage().nbytes()

    def extra_repr(self) -> str:
        return f"hidden={self.hidden_channels}, stride={self._stride}, residual={self.residual}"


def _is_pointwise(module: nn.Module | None) -> bool:
    if not isinstance(module, ConvAct):
        return False
    conv = module.conv
    return (conv.kernel_size == (1, 1) and conv.stride == (1, 1) and conv.padding == (0, 0)
            and conv.groups == 1 and conv.padding_mode == "zeros")


def _is_depthwise(module: nn.Module | None) -> bool:
    if not isinstance(module, ConvAct):
        return False
    conv = module.conv
    square = conv.kernel_size[0] == conv.kernel_size[1] and conv.stride[0] == conv.stride[1]
    symmetric = isinstance(conv.padding, tuple) and conv.padding[0] == conv.padding[1]
    return (conv.groups == conv.in_channels == conv.out_channels and square and symmetric
            and conv.padding_mode == "zeros")


def _zero_pad_before(graph_module: fx.GraphModule, node: fx.Node) -> tuple[int, int, int, int] | None:
    """(left, right, top, bottom) of a constant zero F.pad of H and W whose only reader is `node`, a depthwise
    conv with no padding of its own; else None."""
    conv = cast(ConvAct, module_of(graph_module, node)).conv
    pad = node.args[0]
    if (conv.padding != (0, 0) or not isinstance(pad, fx.Node) or pad.op != "call_function" or pad.target is not F.pad
            or single_user(pad) is not node or not isinstance(pad.args[0], fx.Node)):
        return None
    amounts = pad.args[1] if len(pad.args) > 1 else pad.kwargs.get("pad")
    mode, value = pad.kwargs.get("mode", "constant"), pad.kwargs.get("value", 0.0)
    if (len(pad.args) > 2 or mode != "constant" or value not in (0, 0.0, None) or not isinstance(amounts, (list, tuple))
            or len(amounts) != 4 or not all(isinstance(a, int) and a >= 0 for a in amounts)):
        return None
    return cast(tuple[int, int, int, int], tuple(amounts))


def split_inverted_residuals(graph_module: fx.GraphModule) -> int:
    """Replace each [expand ->] depthwise -> project [+ x] chain by one BandedInvertedResidual node.

    Each link must be its predecessor's only reader. Returns the number of blocks replaced.
    """
    graph = graph_module.graph
    replaced = 0
    for node in list(graph.nodes):
        if not _is_depthwise(module_of(graph_module, node)):
            continue
        source = node.args[0]
        assert isinstance(source, fx.Node)
        zero_pad = _zero_pad_before(graph_module, node)
        reader = node  # the depthwise, or the zero pad before it
        if zero_pad is not None:
            reader, source = source, source.args[0]  # type: ignore[assignment]
            assert isinstance(source, fx.Node)
        expand = source if _is_pointwise(module_of(graph_module, source)) and single_user(source) is reader else None
        project = single_user(node)
        if project is None or not _is_pointwise(module_of(graph_module, project)):
            # e.g. squeeze-excitation reads the whole depthwise output: a stride-1 depthwise alone, in bands
            # that may overwrite its input where the input dies there (forward_in_place); behind a zero pad,
            # at any stride, in bands that pad themselves (no padded copy of the input)
            depthwise = cast(ConvAct, module_of(graph_module, node))
            if single_user(source) is not reader or (depthwise.conv.stride[0] != 1 and zero_pad is None):
                continue
            expand = project = None
        block_input = expand.args[0] if expand is not None else source
        assert isinstance(block_input, fx.Node)
        last = project or node
        adder = single_user(project) if project is not None else None
        residual = (adder is not None and adder.op == "call_function" and adder.target in (operator.add, torch.add)
                    and len(adder.args) == 2 and not adder.kwargs and set(adder.args) == {block_input, project})
        if residual:
            assert adder is not None
            last = adder
        module = BandedInvertedResidual(
            module_of(graph_module, expand) if expand is not None else None,  # type: ignore[arg-type]
            module_of(graph_module, node),  # type: ignore[arg-type]
            module_of(graph_module, project) if project is not None else None,  # type: ignore[arg-type]
            residual,
        )
        module.zero_pad = zero_pad
        name = f"{node.target}_banded".replace(".", "_")
        graph_module.add_submodule(name, module)
        with graph.inserting_after(last):
            banded = graph.call_module(name, (block_input,))
        last.replace_all_uses_with(banded)
        graph.eliminate_dead_code()
        replaced += 1
    graph_module.delete_all_unused_submodules()
    graph_module.recompile()
    return replaced


def band_concat_convs(graph_module: fx.GraphModule) -> int:
    """Wrap each conv whose input is a concatenation (read by it alone) as a banded step, so that
    `fuse_concat_inputs` can make the concatenation virtual. Returns the number wrapped."""
    return _band_convs_reading(graph_module, lambda source: source.op == "call_function" and source.target is torch.cat)


def band_upsampled_convs(graph_module: fx.GraphModule) -> int:
    """Wrap each conv whose input is an upsampled tensor (read by it alone: an `nn.Upsample -> conv` up-conv)
    as a banded step, so that `fuse_concat_inputs(..., lone_upsample=True)` builds the upsampled rows band
    by band. Run after the tail passes, which take such convs at the graph's end into their chain."""
    return _band_convs_reading(graph_module, lambda source: upsample_part(source, align_corners_ok=True) is not None)


def _band_convs_reading(graph_module: fx.GraphModule, accepts: Callable[[fx.Node], bool]) -> int:
    graph = graph_module.graph
    wrapped = 0
    for node in list(graph.nodes):
        conv = module_of(graph_module, node)
        source = node.args[0] if node.args else None
        if not isinstance(conv, ConvAct) or not isinstance(source, fx.Node) or len(node.args) != 1:
            continue
        if not accepts(source) or len(source.users) != 1:
            continue
        if conv.conv.stride[0] != conv.conv.stride[1] or not isinstance(conv.conv.padding, tuple):
            continue
        name = f"{node.target}_banded".replace(".", "_")
        graph_module.add_submodule(name, BandedInvertedResidual(None, conv, None, residual=False))
        with graph.inserting_after(node):
            banded = graph.call_module(name, (source,))
        node.replace_all_uses_with(banded)
        graph.erase_node(node)
        wrapped += 1
    graph_module.delete_all_unused_submodules()
    graph_module.recompile()
    return wrapped
