"""The U-Net most people write from the paper, as a user brings it: milesial/Pytorch-UNet's `UNet` (double
3x3 convs, max pools, 2x2 up-convs or bilinear upsampling with align_corners=True, skips padded to size
and concatenated), random weights, saved as `.pt2` (torch.export) + `.onnx` (torch.onnx's TorchScript
exporter, as its README does it) + a card, for `leanseg bench --zoo DIR`. Needs only torch.

    .venv/bin/python scripts/export_classic_unet.py out/zoo_user            # up-convs, base width 64
    .venv/bin/python scripts/export_classic_unet.py out/zoo_user --bilinear
"""
from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

CLASSES = 12


class DoubleConv(nn.Module):
    def __init__(self, cin: int, cout: int, mid: int | None = None) -> None:
        super().__init__()
        mid = mid or cout
        self.double_conv = nn.Sequential(
            nn.Conv2d(cin, mid, 3, padding=1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
            nn.Conv2d(mid, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))

    def forward(self, x: Tensor) -> Tensor:
        return self.double_conv(x)


class Down(nn.Module):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.maxpool_conv = nn.Sequential(nn.MaxPool2d(2), DoubleConv(cin, cout))

    def forward(self, x: Tensor) -> Tensor:
        return self.maxpool_conv(x)


class Up(nn.Module):
    def __init__(self, cin: int, cout: int, bilinear: bool) -> None:
        super().__init__()
        if bilinear:
            self.up: nn.Module = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
            self.conv = DoubleConv(cin, cout, cin // 2)
        else:
            self.up = nn.ConvTranspose2d(cin, cin // 2, kernel_size=2, stride=2)
            self.conv = DoubleConv(cin, cout)

    def forward(self, x: Tensor, skip: Tensor) -> Tensor:
        x = self.up(x)
        dy, dx = skip.size(2) - x.size(2), skip.size(3) - x.size(3)
        x = F.pad(x, [dx // 2, dx - dx // 2, dy // 2, dy - dy // 2])
        return self.conv(torch.cat([skip, x], dim=1))


class UNet(nn.Module):
    def __init__(self, base: int, bilinear: bool) -> None:
        super().__init__()
        factor = 2 if bilinear else 1
        self.inc = DoubleConv(3, base)
        self.down1, self.down2 = Down(base, 2 * base), Down(2 * base, 4 * base)
        self.down3, self.down4 = Down(4 * base, 8 * base), Down(8 * base, 16 * base // factor)
        self.up1 = Up(16 * base, 8 * base // factor, bilinear)
        self.up2 = Up(8 * base, 4 * base // factor, bilinear)
        self.up3 = Up(4 * base, 2 * base // factor, bilinear)
        self.up4 = Up(2 * base, base, bilinear)
        self.outc = nn.Conv2d(base, CLASSES, 1)

    def forward(self, x: Tensor) -> Tensor:
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        x4 = self.down3(x3)
        x = self.up1(self.down4(x4), x4)
        return self.outc(self.up4(self.up3(self.up2(x, x3), x2), x1))


def export(folder: Path, base: int, bilinear: bool) -> Path:
    torch.manual_seed(0)
    model = UNet(base, bilinear).eval()
    for module in model.modules():  # statistics a trained net would have, not the identity
        if isinstance(module, nn.BatchNorm2d):
            module.running_mean.uniform_(-0.2, 0.2)
            module.running_var.uniform_(0.5, 1.5)
    name = f"milesial_unet_b{base}" + ("_bilinear" if bilinear else "")
    folder.mkdir(parents=True, exist_ok=True)
    example = (torch.rand(1, 3, 64, 96),)
    Dim = torch.export.Dim
    rows, cols = Dim("rows", min=2, max=128), Dim("cols", min=2, max=128)
    program = torch.export.export(model, example, dynamic_shapes={"x": {2: 16 * rows, 3: 16 * cols}})
    torch.export.save(program, str(folder / f"{name}.pt2"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, example, str(folder / f"{name}.onnx"), dynamo=False, opset_version=17,
                          input_names=["x"], output_names=["logits"], dynamic_axes={"x": {2: "h", 3: "w"}})
    card = {"card_version": 1, "name": name, "architecture": f"milesial/Pytorch-UNet UNet, bilinear={bilinear}",
            "classes": [f"class {i}" for i in range(CLASSES)],
            "input": {"channels": 3, "range": "0..1 RGB, then normalised", "mean": [0.485, 0.456, 0.406],
                      "std": [0.229, 0.224, 0.225], "size_multiple": 16},
            "output": "logits (1, classes, height, width)", "weights": "random, seed 0"}
    (folder / f"{name}.json").write_text(json.dumps(card, indent=2))
    return folder / f"{name}.pt2"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--base", type=int, default=64, help="channels of the first level (default 64)")
    parser.add_argument("--bilinear", action="store_true", help="bilinear upsampling instead of up-convs")
    args = parser.parse_args()
    print(f"wrote {export(args.folder, args.base, args.bilinear)} (+ .onnx, .json)")


if __name__ == "__main__":
    main()
