"""Pass: the labels-out head. [upsample] -> 1x1 conv -> [crop] -> output runs in row bands and
emits labels (argmax per band), so full-size logits and the full-size upsampled tensor never exist."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, fx, nn

from ..model.padding import crop_like
from .band_pool import row_bands, run_bands
from .capture import module_of
from .fuse import ConvAct
from .row_resize import source_rows
from .virtual import upsample_part

DEFAULT_BAND_BYTES = 4 * 2**20  # temporaries per band: upsampled rows + their logits


def labels_dtype(num_classes: int) -> torch.dtype:
    return torch.uint8 if num_classes <= 256 else torch.int64


def labels_from_logits(logits: Tensor, rows_per_band: int = 64) -> Tensor:
    """(1, K, H, W) -> (1, H, W) argmax labels, band by band (no full-size int64 temporary)."""
    labels = torch.empty(logits.shape[:1] + logits.shape[2:], dtype=labels_dtype(logits.shape[1]),
                         device=logits.device)
    for top in range(0, logits.shape[2], rows_per_band):
        labels[:, top:top + rows_per_band] = logits[:, :, top:top + rows_per_band].argmax(1)
    return labels


class LabelsHead(nn.Module):
    """(1, C, h, w) -> labels (1, H, W) or logits (1, K, H, W), H = h * scale cropped to `reference`.

    `emit` is set by the executor before each run: 'labels' or 'logits'.
    """

    def __init__(self, conv: ConvAct, scale: int | None, mode: str | None, crop: bool) -> None:
        super().__init__()
        if mode not in (None, "nearest", "bilinear"):
            raise ValueError(f"unsupported head upsampling {mode!r}; valid: nearest, bilinear")
        self.conv = conv
        self.scale = scale
        self.mode = mode
        self.crop = crop
        self.emit = "labels"
        self.band_bytes = DEFAULT_BAND_BYTES
        self.transient_bytes = 0  # bytes of band temporaries held at once in the last call
        self.parallel_bands = True  # CPU: bands on parallel single-threaded workers (see band_pool)

    def forward(self, z: Tensor, reference: Tensor | None = None) -> Tensor:
        scale = self.scale or 1
        height, width = z.shape[2] * scale, z.shape[3] * scale
        if self.crop:
            assert reference is not None
            height, width = min(height, reference.shape[2]), min(width, reference.shape[3])
        classes = self.conv.conv.out_channels
        if self.emit == "labels":
            out = torch.empty((1, height, width), dtype=labels_dtype(classes), device=z.device)
        else:
            out = torch.empty((1, classes, height, width), dtype=z.dtype, device=z.device)
        row_bytes = (z.shape[1] + classes + 2) * z.shape[3] * scale * z.element_size()
        rows = max(1, min(height, self.band_bytes // max(1, row_bytes)))

        def run_band(top: int, bottom: int) -> int:
            logits, upsampled_bytes = self._band_logits(z, top, bottom, width)  # (1, K, bottom - top, width)
            band_bytes = upsampled_bytes + logits.untyped_storage().nbytes()
            if logits.is_meta:  # estimate_peak: the bytes only (meta argmax and copies are slow Python)
                return band_bytes + (logits[:, 0].numel() * 8 if self.emit == "labels" else 0)
            if self.emit == "labels":
                labels = logits.argmax(1)
                band_bytes += labels.untyped_storage().nbytes()
                out[:, top:bottom] = labels
            else:
                out[:, :, top:bottom] = logits
            return band_bytes

        self.transient_bytes = run_bands(run_band, row_bands(height, rows), z.device, self.parallel_bands)
        return out

    def _band_logits(self, z: Tensor, top: int, bottom: int, width: int) -> tuple[Tensor, int]:
        """Logits of output rows [top, bottom) cropped to `width`, and the upsampled band's bytes."""
        if self.scale is None or self.mode is None:
            return self.conv(z[:, :, top:bottom])[..., :width], 0
        first, last = source_rows(top, bottom, self.scale, self.mode, z.shape[2])
        source = z[:, :, first:last]
        if source.is_meta:  # estimate_peak: the upsampled band's shape, without the slow meta decomposition
            batch, channels, height, width_in = source.shape
            upsampled = source.new_empty((batch, channels, height * self.scale, width_in * self.scale))
        elif self.mode == "bilinear":
            upsampled = F.interpolate(source, scale_factor=float(self.scale), mode="bilinear", align_corners=False)
        else:
            upsampled = F.interpolate(source, scale_factor=float(self.scale), mode="nearest")
        offset = top - first * self.scale
        rows = upsampled[:, :, offset:offset + bottom - top]
        return self.conv(rows)[..., :width], upsampled.untyped_storage().nbytes()

    def extra_repr(self) -> str:
        return f"scale={self.scale}, mode={self.mode}, crop={self.crop}"


def labels_head(graph_module: fx.GraphModule) -> bool:
    """Replace the graph's tail [interpolate] -> ConvAct 1x1 -> [crop_like] by one LabelsHead node.

    Returns whether the pattern was found (a plan without it takes argmax over full logits).
    """
    graph = graph_module.graph
    output = next(node for node in graph.nodes if node.op == "output")
    tail = output.args[0]
    if not isinstance(tail, fx.Node) or list(tail.users) != [output]:
        return False
    crop, reference = False, None
    if tail.op == "call_function" and tail.target is crop_like:
        crop, reference, tail = True, tail.args[1], tail.args[0]
        if not isinstance(tail, fx.Node) or len(tail.users) != 1:
            return False
    conv = module_of(graph_module, tail)
    if not isinstance(conv, ConvAct) or conv.conv.kernel_size != (1, 1) or conv.conv.stride != (1, 1):
        return False
    if conv.conv.groups != 1 or conv.conv.padding != (0, 0) or conv.activation is not None:
        return False
    source = tail.args[0]
    assert isinstance(source, fx.Node)
    part = upsample_part(source) if len(source.users) == 1 else None
    spec = (part.scale, part.mode) if part is not None and part.scale is not None else None
    if spec is not None:
        upsampled_from = source.args[0]
        assert isinstance(upsampled_from, fx.Node)
        source = upsampled_from
    name = f"{tail.target}_labels_head".replace(".", "_")
    graph_module.add_submodule(name, LabelsHead(conv, spec[0] if spec else None, spec[1] if spec else None, crop))
    with graph.inserting_before(output):
        head = graph.call_module(name, (source, reference) if crop else (source,))
    output.args = (head,)
    graph.eliminate_dead_code()
    graph_module.delete_all_unused_submodules()
    graph_module.recompile()
    return True
