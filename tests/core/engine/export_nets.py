"""Small nets that carry the patterns public segmentation models are built from (MobileNetV3's SE block,
EfficientNet's functional static-padding conv, smp's shape checks, FPN, ASPP, ResNet, a U-Net decoder),
and their torch.export to a `.pt2` with a dynamic height and width (multiples of 32)."""
from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .nets import randomise_batchnorm


def conv_bn(cin: int, cout: int, k: int = 3, stride: int = 1, dilation: int = 1, groups: int = 1) -> nn.Sequential:
    pad = dilation * (k - 1) // 2
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, pad, dilation, groups, bias=False), nn.BatchNorm2d(cout))


class SEBlock(nn.Module):
    """MobileNetV3's inverted residual with squeeze-excitation: the global pool sits inside the block."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = conv_bn(3, 8, stride=2)
        self.expand, self.dw, self.project = conv_bn(8, 24, 1), conv_bn(24, 24, groups=24), conv_bn(24, 8, 1)
        self.pool, self.fc1, self.fc2, self.gate = nn.AdaptiveAvgPool2d(1), nn.Conv2d(24, 8, 1), \
            nn.Conv2d(8, 24, 1), nn.Hardsigmoid()
        self.head = nn.Conv2d(8, 4, 1)

    def forward(self, x: Tensor) -> Tensor:
        y = F.hardswish(self.stem(x))
        z = F.hardswish(self.dw(F.hardswish(self.expand(y))))
        z = z * self.gate(self.fc2(F.relu(self.fc1(self.pool(z)))))
        y = y + self.project(z)
        return F.interpolate(self.head(y), scale_factor=2, mode="bilinear", align_corners=False)


class StaticSameConv(nn.Conv2d):
    """EfficientNet's Conv2dStaticSamePadding: `F.pad` by a padding fixed at construction, then `F.conv2d`."""

    def __init__(self, cin: int, cout: int, k: int, stride: int = 1, groups: int = 1) -> None:
        super().__init__(cin, cout, k, stride, 0, groups=groups, bias=False)
        total = max(k - stride, 0)  # "same" for an even input size
        self.static_pad = (total // 2, total - total // 2, total // 2, total - total // 2)

    def forward(self, x: Tensor) -> Tensor:
        return F.conv2d(F.pad(x, self.static_pad), self.weight, self.bias, self.stride, 0, self.dilation, self.groups)


class FunctionalStaticPadding(nn.Module):
    """EfficientNet-style stem and depthwise-separable block of functional convs with asymmetric static padding."""

    def __init__(self) -> None:
        super().__init__()
        self.stem, self.bn0 = StaticSameConv(3, 8, 3, stride=2), nn.BatchNorm2d(8)
        self.dw, self.bn1 = StaticSameConv(8, 8, 5, groups=8), nn.BatchNorm2d(8)
        self.pw, self.bn2 = StaticSameConv(8, 8, 1), nn.BatchNorm2d(8)
        self.head = nn.Conv2d(8, 4, 1)

    def forward(self, x: Tensor) -> Tensor:
        y = F.silu(self.bn0(self.stem(x)))
        y = y + self.bn2(self.pw(F.silu(self.bn1(self.dw(y)))))
        return F.interpolate(self.head(y), scale_factor=2, mode="nearest")


class ShapeBranch(nn.Module):
    """Python control flow on the input's size (smp's shape check, a branch on the width): torch.fx cannot
    trace it, torch.export follows it. Export with widths above 64 only (both branches are sound nets)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = conv_bn(3, 8, stride=2)
        self.wide, self.narrow = conv_bn(8, 8, dilation=2), conv_bn(8, 8)
        self.head = nn.Conv2d(8, 4, 3, padding=1)

    def forward(self, x: Tensor) -> Tensor:
        if x.shape[-2] % 32 != 0 or x.shape[-1] % 32 != 0:
            raise RuntimeError(f"height and width must be multiples of 32, got {tuple(x.shape[-2:])}")
        y = F.relu(self.stem(x))
        y = F.relu(self.wide(y)) if x.shape[-1] > 64 else F.relu(self.narrow(y))
        return F.interpolate(self.head(y), size=x.shape[-2:], mode="bilinear", align_corners=False)


class FPNMerge(nn.Module):
    """Top-down: nearest 2x upsample + lateral skip, GroupNorm, smp's stack-and-sum of upsampled branches
    (nearest, bilinear align_corners=True), bilinear align_corners=True 4x head."""

    def __init__(self) -> None:
        super().__init__()
        self.c1, self.c2, self.c3 = conv_bn(3, 8, stride=4, k=5), conv_bn(8, 16, stride=2), conv_bn(16, 16, stride=2)
        self.l1, self.l2, self.top = nn.Conv2d(8, 16, 1), nn.Conv2d(16, 16, 1), nn.Conv2d(16, 16, 1)
        self.norm = nn.GroupNorm(4, 16)
        self.head = nn.Conv2d(16, 4, 3, padding=1)

    def forward(self, x: Tensor) -> Tensor:
        c1 = F.relu(self.c1(x))  # stride 4
        c2 = F.relu(self.c2(c1))  # 8
        c3 = F.relu(self.c3(c2))  # 16
        p3 = self.top(c3)
        p2 = F.interpolate(p3, scale_factor=2, mode="nearest") + self.l2(c2)
        p1 = F.interpolate(p2, scale_factor=2, mode="nearest") + self.l1(c1)
        branches = [F.relu(self.norm(p1)),
                    F.interpolate(p2, scale_factor=2, mode="nearest"),
                    F.interpolate(p3, scale_factor=4, mode="bilinear", align_corners=True)]
        merged = torch.stack(branches).sum(dim=0)
        return F.interpolate(self.head(merged), scale_factor=4, mode="bilinear", align_corners=True)


class ASPP(nn.Module):
    """Parallel dilated convs and a global-pool branch upsampled to `size=y.shape[-2:]`, concatenated."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = conv_bn(3, 8, stride=2)
        self.branches = nn.ModuleList([conv_bn(8, 8, 1)] + [conv_bn(8, 8, dilation=d) for d in (2, 3)])
        self.pool_conv = nn.Conv2d(8, 8, 1)
        self.project, self.head = conv_bn(32, 8, 1), nn.Conv2d(8, 4, 1)

    def forward(self, x: Tensor) -> Tensor:
        y = F.relu(self.stem(x))
        pooled = F.relu(self.pool_conv(F.adaptive_avg_pool2d(y, 1)))
        pooled = F.interpolate(pooled, size=y.shape[-2:], mode="bilinear", align_corners=False)
        y = torch.cat([F.relu(b(y)) for b in self.branches] + [pooled], dim=1)
        logits = self.head(F.relu(self.project(y)))
        return F.interpolate(logits, size=x.shape[-2:], mode="bilinear", align_corners=False)


class ResNetBasic(nn.Module):
    """Stem, a basic block (conv-BN-ReLU-conv-BN + identity, ReLU) at stride 2, a 2x-upsampled 1x1 head."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = conv_bn(3, 8, stride=2)
        self.a1, self.a2 = conv_bn(8, 8), conv_bn(8, 8)
        self.head = nn.Conv2d(8, 4, 1)

    def forward(self, x: Tensor) -> Tensor:
        y = F.relu(self.stem(x))
        y = F.relu(y + self.a2(F.relu(self.a1(y))))
        return F.interpolate(self.head(y), scale_factor=2, mode="bilinear", align_corners=False)


class TinyUNet(nn.Module):
    """Two stride-2 levels; the decoder upsamples to `size=skip.shape[-2:]` (as smp's U-Net does), concatenates
    the skip, and a 3x3 conv block and a 3x3 head run at full resolution."""

    def __init__(self, width: int = 8) -> None:
        super().__init__()
        self.e0, self.e1, self.e2 = conv_bn(3, width), conv_bn(width, 2 * width, stride=2), \
            conv_bn(2 * width, 2 * width, stride=2)
        self.d1 = conv_bn(4 * width, width)
        self.d0a, self.d0b = conv_bn(2 * width, width), conv_bn(width, width)
        self.head = nn.Conv2d(width, 5, 3, padding=1)

    def forward(self, x: Tensor) -> Tensor:
        s0 = F.relu(self.e0(x))
        s1 = F.relu(self.e1(s0))
        y = F.relu(self.e2(s1))
        y = F.relu(self.d1(torch.cat([F.interpolate(y, size=s1.shape[-2:], mode="nearest"), s1], 1)))
        y = torch.cat([F.interpolate(y, size=s0.shape[-2:], mode="nearest"), s0], 1)
        y = F.hardswish(self.d0b(F.relu(self.d0a(y))))
        return self.head(y)


class ResNetUNet(nn.Module):
    """smp's U-Net on a ResNet: a 7x7 stride-2 stem (also the stride-2 skip), a 3x3 max pool, a basic block,
    then a decoder that upsamples to the stem's size, concatenates the stem, and a 3x3 conv and head."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.stem, self.pool = conv_bn(3, width, k=7, stride=2), nn.MaxPool2d(3, 2, 1)
        self.a1, self.a2 = conv_bn(width, width), conv_bn(width, width)
        self.decode = conv_bn(2 * width, 8)
        self.head = nn.Conv2d(8, 5, 3, padding=1)

    def forward(self, x: Tensor) -> Tensor:
        skip = F.relu(self.stem(x))
        y = self.pool(skip)
        y = F.relu(y + self.a2(F.relu(self.a1(y))))
        y = torch.cat([F.interpolate(y, size=skip.shape[-2:], mode="nearest"), skip], 1)
        y = F.interpolate(F.relu(self.decode(y)), scale_factor=2, mode="nearest")
        return self.head(y)


class LearnedUpsample(nn.Module):
    """A decoder's learned 2x upsample (ConvTranspose2d, 2x2 kernel) beside a bilinear one, after an SE gate."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = conv_bn(3, 8, stride=2)
        self.fc = nn.Conv2d(8, 8, 1)
        self.up = nn.ConvTranspose2d(8, 8, 2, stride=2)
        self.head = nn.Conv2d(8, 4, 3, padding=1)

    def forward(self, x: Tensor) -> Tensor:
        y = F.relu(self.stem(x))
        y = y * torch.sigmoid(self.fc(y.mean((2, 3), keepdim=True)))
        y = self.up(y) + F.interpolate(y, scale_factor=2, mode="bilinear", align_corners=False)
        return self.head(y)


class PyramidMerge(nn.Module):
    """smp FPN's shape in small: a pyramid p3 (1/4), p2 (1/2), p1 (full: upsample + lateral), one branch per
    level, the coarse ones upsampled as their last step, summed coarse first."""

    def __init__(self) -> None:
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(3, 4, 3, padding=1), nn.Conv2d(4, 8, 3, stride=2, padding=1)
        self.c3, self.top = nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.Conv2d(8, 32, 1)
        self.l2, self.l1 = nn.Conv2d(8, 32, 1), nn.Conv2d(4, 32, 1)
        self.b3, self.b2, self.b1 = (nn.Conv2d(32, 16, 3, padding=1) for _ in range(3))
        self.norm = nn.GroupNorm(4, 16)
        self.head = nn.Conv2d(16, 4, 1)

    def forward(self, x: Tensor) -> Tensor:
        c1 = F.relu(self.c1(x))
        c2 = F.relu(self.c2(c1))
        p3 = self.top(F.relu(self.c3(c2)))
        p2 = F.interpolate(p3, scale_factor=2.0, mode="nearest") + self.l2(c2)
        p1 = F.interpolate(p2, scale_factor=2.0, mode="nearest") + self.l1(c1)
        b3 = F.relu(self.b3(p3))
        for _ in range(2):
            b3 = F.interpolate(b3, scale_factor=2.0, mode="bilinear", align_corners=True)
        b2 = F.interpolate(F.relu(self.b2(p2)), scale_factor=2.0, mode="bilinear", align_corners=True)
        b1 = F.relu(self.norm(self.b1(p1)))
        return self.head(b3 + b2 + b1)


class UpConcat(nn.Module):
    """milesial/Pytorch-UNet's `Up`: a 2x2 up-conv, padded to the skip's size (a zero pad at every size the
    model takes), concatenated after the skip, then two 3x3 convs."""

    def __init__(self, cin: int, cout: int, norm: bool) -> None:
        super().__init__()
        up = nn.ConvTranspose2d(cin, cin // 2, 2, stride=2)
        self.up = nn.Sequential(up, nn.BatchNorm2d(cin // 2), nn.ReLU()) if norm else up
        self.conv = nn.Sequential(conv_bn(cin, cout), nn.ReLU(), conv_bn(cout, cout), nn.ReLU())

    def forward(self, x: Tensor, skip: Tensor) -> Tensor:
        x = self.up(x)
        dy, dx = skip.size(2) - x.size(2), skip.size(3) - x.size(3)
        x = F.pad(x, [dx // 2, dx - dx // 2, dy // 2, dy - dy // 2])
        return self.conv(torch.cat([skip, x], dim=1))


class ClassicUNet(nn.Module):
    """The U-Net people write from the paper: double 3x3 convs, max pools, learned up-convs (one followed by
    BatchNorm + ReLU, as LinkNet's are), skips concatenated."""

    def __init__(self) -> None:
        super().__init__()
        self.inc = nn.Sequential(conv_bn(3, 8), nn.ReLU(), conv_bn(8, 8), nn.ReLU())
        self.down1 = nn.Sequential(nn.MaxPool2d(2), conv_bn(8, 16), nn.ReLU())
        self.down2 = nn.Sequential(nn.MaxPool2d(2), conv_bn(16, 32), nn.ReLU())
        self.up1, self.up2 = UpConcat(32, 16, norm=True), UpConcat(16, 8, norm=False)
        self.head = nn.Conv2d(8, 4, 1)

    def forward(self, x: Tensor) -> Tensor:
        x1 = self.inc(x)
        x2 = self.down1(x1)
        return self.head(self.up2(self.up1(self.down2(x2), x2), x1))


class PositionAttention(nn.Module):
    """MAnet's / DANet's position attention at 1/4 size: every position attends to every other (reshape,
    transpose, batched matmul, softmax), added back to the map."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = conv_bn(3, 8, stride=4)
        self.query, self.key, self.value = nn.Conv2d(8, 2, 1), nn.Conv2d(8, 2, 1), nn.Conv2d(8, 8, 1)
        self.head = nn.Conv2d(8, 4, 1)

    def forward(self, x: Tensor) -> Tensor:
        y = F.relu(self.stem(x))
        b, c, h, w = y.shape
        query = self.query(y).view(b, -1, h * w).permute(0, 2, 1)
        attention = torch.softmax(torch.bmm(query, self.key(y).flatten(2)), dim=-1)
        out = torch.matmul(self.value(y).view(b, -1, h * w), attention.transpose(1, 2)).reshape(b, c, h, w)
        return F.interpolate(self.head(y + 0.5 * out), scale_factor=4, mode="bilinear", align_corners=False)


def conv_in_lrelu(cin: int, cout: int, stride: int = 1) -> nn.Sequential:
    """nnU-Net's unit: conv -> InstanceNorm (affine, the input's own statistics) -> LeakyReLU(0.01)."""
    norm = nn.InstanceNorm2d(cout, affine=True)
    norm.weight.data.uniform_(0.5, 1.5)
    norm.bias.data.uniform_(-0.2, 0.2)
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1), norm, nn.LeakyReLU(0.01, inplace=True))


class InstanceNormUNet(nn.Module):
    """nnU-Net's 2-D plain U-Net, two levels: strided convs down, a transposed conv up, skips concatenated."""

    def __init__(self) -> None:
        super().__init__()
        self.enc0 = nn.Sequential(conv_in_lrelu(3, 8), conv_in_lrelu(8, 8))
        self.enc1 = nn.Sequential(conv_in_lrelu(8, 16, stride=2), conv_in_lrelu(16, 16))
        self.up = nn.ConvTranspose2d(16, 8, 2, 2)
        self.dec = nn.Sequential(conv_in_lrelu(16, 8), conv_in_lrelu(8, 8))
        self.head = nn.Conv2d(8, 4, 1)

    def forward(self, x: Tensor) -> Tensor:
        skip = self.enc0(x)
        return self.head(self.dec(torch.cat([self.up(self.enc1(skip)), skip], 1)))


class PaddingModules(nn.Module):
    """Padding written as modules and modes: efficientnet_pytorch's `nn.ZeroPad2d` before a stride-2 conv (smp's
    `efficientnet-b0` encoder; `aten.pad` with its mode), a `padding_mode="reflect"` conv and a `ReplicationPad2d`."""

    def __init__(self) -> None:
        super().__init__()
        self.same = nn.Sequential(nn.ZeroPad2d((0, 1, 0, 1)), nn.Conv2d(3, 8, 3, stride=2, bias=False),
                                  nn.BatchNorm2d(8))
        self.reflect = nn.Conv2d(8, 8, 3, padding=1, padding_mode="reflect")
        self.replicate = nn.Sequential(nn.ReplicationPad2d(1), nn.Conv2d(8, 8, 3))
        self.head = nn.Conv2d(8, 4, 1)

    def forward(self, x: Tensor) -> Tensor:
        y = F.silu(self.same(x))
        y = F.relu(self.replicate(F.relu(self.reflect(y))))
        return F.interpolate(self.head(y), scale_factor=2, mode="bilinear", align_corners=False)


class LayerNorm2d(nn.LayerNorm):
    """timm's LayerNorm2d: a LayerNorm over channels, written as permute -> layer_norm -> permute back."""

    def forward(self, x: Tensor) -> Tensor:
        x = x.permute(0, 2, 3, 1)
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps).permute(0, 3, 1, 2)


class ConvNeXtUNet(nn.Module):
    """A timm ConvNeXt encoder under smp's U-Net: a 4x4 stride-4 stem with LayerNorm2d, a block (7x7
    depthwise, LayerNorm2d, 1x1 conv MLP with GELU, layer scale, residual), and the empty zero-channel
    stride-2 feature smp's `tu-` encoders put in for the stride ConvNeXt lacks, concatenated in the decoder."""

    def __init__(self) -> None:
        super().__init__()
        self.stem, self.stem_norm = nn.Conv2d(3, 16, 4, stride=4), LayerNorm2d(16, eps=1e-6)
        self.dw, self.norm = nn.Conv2d(16, 16, 7, padding=3, groups=16), LayerNorm2d(16, eps=1e-6)
        self.fc1, self.fc2 = nn.Conv2d(16, 32, 1), nn.Conv2d(32, 16, 1)
        self.gamma = nn.Parameter(torch.full((16,), 0.5))
        self.decode = conv_bn(16, 8)
        self.head = nn.Conv2d(8, 4, 3, padding=1)

    def forward(self, x: Tensor) -> Tensor:
        y = self.stem_norm(self.stem(x))
        y = y + self.fc2(F.gelu(self.fc1(self.norm(self.dw(y))))) * self.gamma.reshape(1, -1, 1, 1)
        empty = torch.empty([1, 0, x.shape[2] // 2, x.shape[3] // 2], dtype=x.dtype, device=x.device)
        y = torch.cat([F.interpolate(y, scale_factor=2, mode="nearest"), empty], dim=1)
        y = F.relu(self.decode(y))
        return self.head(F.interpolate(y, scale_factor=2, mode="nearest"))


class ChannelSplits(nn.Module):
    """Channel splits as Res2Net, CSP and GhostNet blocks make them (`torch.split` by a size and by sizes,
    `chunk`), and ResNeSt's split attention: a (N, radix, C, H, W) view summed over the radix."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = conv_bn(3, 16, stride=2)
        self.b1, self.b2 = conv_bn(4, 4), conv_bn(8, 8)
        self.radix = conv_bn(16, 32, groups=2)
        self.head = nn.Conv2d(16, 4, 1)

    def forward(self, x: Tensor) -> Tensor:
        y = F.relu(self.stem(x))
        a, b, c = torch.split(y, [4, 4, 8], dim=1)  # Res2Net: sizes
        b = F.relu(self.b1(a)) + b
        left, right = y.chunk(2, dim=1)  # CSP: halves
        y = torch.cat([a, b, F.relu(self.b2(c)) + right], dim=1) + torch.cat([left, left], dim=1)
        n, _, h, w = y.shape
        y = F.relu(self.radix(y)).reshape(n, 2, 16, h, w).sum(dim=1)  # ResNeSt: sum over the radix
        return F.interpolate(self.head(y), scale_factor=2, mode="bilinear", align_corners=False)


class StaticPadMBConv(nn.Module):
    """EfficientNet's MBConv blocks as smp's `efficientnet-b0` encoder writes them: 1x1 expand, `nn.ZeroPad2d`
    with TF "same" amounts (asymmetric at stride 2), an unpadded depthwise, squeeze-excitation, 1x1 project."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = conv_bn(3, 8)
        self.expand1, self.pad1, self.dw1 = conv_bn(8, 32, 1), nn.ZeroPad2d((0, 1, 0, 1)), \
            nn.Sequential(nn.Conv2d(32, 32, 3, 2, groups=32, bias=False), nn.BatchNorm2d(32))
        self.project1 = conv_bn(32, 12, 1)
        self.expand2, self.pad2, self.dw2 = conv_bn(12, 48, 1), nn.ZeroPad2d(2), \
            nn.Sequential(nn.Conv2d(48, 48, 5, groups=48, bias=False), nn.BatchNorm2d(48))
        self.squeeze, self.excite = nn.Conv2d(48, 4, 1), nn.Conv2d(4, 48, 1)
        self.project2 = conv_bn(48, 12, 1)
        self.lateral, self.head = nn.Conv2d(8, 12, 1), nn.Conv2d(12, 4, 1)

    def forward(self, x: Tensor) -> Tensor:
        y = s = F.silu(self.stem(x))
        y = self.project1(F.silu(self.dw1(self.pad1(F.silu(self.expand1(y))))))  # no SE: a whole banded block
        z = F.silu(self.dw2(self.pad2(F.silu(self.expand2(y)))))  # SE reads the depthwise's whole output
        z = z * torch.sigmoid(self.excite(F.silu(self.squeeze(z.mean((2, 3), keepdim=True)))))
        y = y + self.project2(z) + self.lateral(F.avg_pool2d(s, 2))  # the image's detail, so classes vary
        return F.interpolate(self.head(y), scale_factor=2, mode="bilinear", align_corners=False)


class SpelledOutActivations(nn.Module):
    """timm's Swish `x * sigmoid(x)` and a hard swish written `x * hardsigmoid(x)`, each after a conv."""

    def __init__(self) -> None:
        super().__init__()
        self.stem, self.mid = conv_bn(3, 8, stride=2), conv_bn(8, 8)
        self.head = nn.Conv2d(8, 4, 1)

    def forward(self, x: Tensor) -> Tensor:
        y = self.stem(x)
        y = y * torch.sigmoid(y)
        y = self.mid(y)
        y = y * F.hardsigmoid(y)
        return F.interpolate(self.head(y), scale_factor=2, mode="bilinear", align_corners=False)


CASES: dict[str, Callable[[], nn.Module]] = {
    "se_block": SEBlock, "functional_static_padding": FunctionalStaticPadding, "shape_branch": ShapeBranch,
    "fpn_merge": FPNMerge, "aspp": ASPP, "resnet_basic": ResNetBasic, "unet": TinyUNet,
    "resnet_unet": ResNetUNet,
    "learned_upsample": LearnedUpsample, "pyramid_merge": PyramidMerge, "classic_unet": ClassicUNet,
    "position_attention": PositionAttention, "instance_norm_unet": InstanceNormUNet,
    "padding_modules": PaddingModules, "convnext_unet": ConvNeXtUNet, "channel_splits": ChannelSplits,
    "static_pad_mbconv": StaticPadMBConv, "spelled_out_activations": SpelledOutActivations,
}
LOWEST_COLUMNS = {"shape_branch": 3}  # widths >= 96: the branch on `width > 64` is decided for every size


def made(name: str) -> nn.Module:
    """CASES[name] with seeded weights and non-trivial BatchNorm statistics, eval mode."""
    torch.manual_seed(0)
    model = randomise_batchnorm(CASES[name]())
    for module in model.modules():  # GroupNorm and LayerNorm too
        if isinstance(module, (nn.GroupNorm, nn.LayerNorm)):
            module.weight.data.uniform_(0.5, 1.5)
            module.bias.data.uniform_(-0.2, 0.2)
    head = getattr(model, "head", None)
    if isinstance(head, nn.Conv2d) and head.bias is not None:  # no class wins everywhere by its bias alone
        head.bias.data.zero_()
    return model.eval()


def export_pt2(model: nn.Module, path: Path, lowest_columns: int = 1) -> Path:
    """torch.export with height and width any multiple of 32 (up to 2048), saved as `path`."""
    Dim = torch.export.Dim
    rows, cols = Dim("r", min=1, max=64), Dim("c", min=lowest_columns, max=64)
    program = torch.export.export(model.eval(), (torch.rand(1, 3, 64, 96),),
                                  dynamic_shapes={"x": {2: 32 * rows, 3: 32 * cols}})
    torch.export.save(program, str(path))
    return path


def export_onnx(model: nn.Module, path: Path) -> Path:
    """torch.onnx's TorchScript exporter (as most users' READMEs call it), dynamic height and width, opset 17."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model.eval(), (torch.rand(1, 3, 64, 96),), str(path), opset_version=17, dynamo=False,
                          input_names=["image"], output_names=["logits"],
                          dynamic_axes={"image": {2: "height", 3: "width"}, "logits": {2: "height", 3: "width"}})
    return path
