"""Bad model files: each is one CheckpointError line naming the file and the problem, and exit code 2 from the
CLI with nothing written (truncated files, graphs of the wrong shape or size, torch.save files, card mismatches)."""
from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from leanseg.core.model.checkpoint import CheckpointError
from leanseg.core.model.sources import load_model

from . import graph_samples as samples
from .test_model_files import image, models, segment_cli  # noqa: F401 (fixtures)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

class TwoInputs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 1)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        return self.conv(x * mask)


class FiveD(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 1)

    def forward(self, x: Tensor) -> Tensor:  # (1, 3, D, H, W)
        return self.conv(x.mean(2))


class HalfSize(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, stride=2, padding=1)

    def forward(self, x: Tensor) -> Tensor:  # logits at half the input's size, never upsampled
        return self.conv(x)


class Flat(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(10, 3)

    def forward(self, x: Tensor) -> Tensor:  # (1, 10) -> (1, 3): no image in or out
        return self.linear(x)


class ResizedToInput(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, stride=2, padding=1)

    def forward(self, x: Tensor) -> Tensor:  # upsampled to the input's size: a constant in an export of one size
        return F.interpolate(self.conv(x), size=x.shape[-2:], mode="bilinear")


class ChannelsLast(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: Tensor) -> Tensor:  # (1, H, W, K)
        return self.conv(x).permute(0, 2, 3, 1)


class Squeezed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 1, 3, padding=1)

    def forward(self, x: Tensor) -> Tensor:  # (1, H, W): a binary net's class axis dropped
        return torch.sigmoid(self.conv(x))[:, 0]


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: Tensor) -> Tensor:  # (1, 4): not (1, K, H, W)
        return self.conv(x).mean((2, 3))


class Pooled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: Tensor) -> Tensor:  # (1, 4, 1, 1) at any size: pooled away, not exported for one size
        return F.adaptive_avg_pool2d(self.conv(x), 1)


class FlatPixels(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: Tensor) -> Tensor:  # (1, 4, H * W); in ONNX the reshape GroupNorm's export begins with
        return self.conv(x).flatten(2)


def onnx_of(model: nn.Module, path: Path, inputs: tuple[Tensor, ...], names: list[str]) -> Path:
    axes = {name: {t.dim() - 2: "height", t.dim() - 1: "width"} for name, t in zip(names, inputs)}
    torch.onnx.export(model.eval(), inputs, str(path), opset_version=17, dynamo=False, input_names=names,
                      output_names=["out"], dynamic_axes=axes)
    return path


def pt2_of(model: nn.Module, path: Path) -> Path:
    """torch.export for heights and widths that are multiples of 32 from 32 up, as the README says to export."""
    side = torch.export.Dim("side", min=1, max=64)
    program = torch.export.export(model.eval(), (torch.rand(1, 3, 64, 96),),
                                  dynamic_shapes={"x": {2: 32 * side, 3: 32 * torch.export.Dim("w", min=1, max=64)}})
    torch.export.save(program, str(path))
    return path


def truncated(source: Path, path: Path) -> Path:
    data = source.read_bytes()
    path.write_bytes(data[: len(data) * 2 // 3])
    return path


def bad_file(kind: str, models: dict[str, Path], folder: Path, checkpoint: Path) -> tuple[Path, str]:  # noqa: F811
    """(bad model file, a phrase its error must contain)."""
    x = torch.rand(1, 3, 32, 32)
    if kind == "truncated_pt2":
        return truncated(models["pt2"], folder / "cut.pt2"), "truncated"
    if kind == "truncated_onnx":
        return truncated(models["onnx"], folder / "cut.onnx"), "not a readable ONNX model"
    if kind == "truncated_leanseg":
        return truncated(models["leanseg"], folder / "cut.leanseg"), "truncated"
    if kind == "truncated_safetensors":
        return truncated(checkpoint, folder / "cut.safetensors"), "truncated"
    if kind == "two_inputs_onnx":
        return onnx_of(TwoInputs(), folder / "two.onnx", (x, x), ["image", "mask"]), "2 inputs"
    if kind == "two_inputs_pt2":
        program = torch.export.export(TwoInputs().eval(), (x, x))
        torch.export.save(program, str(folder / "two.pt2"))
        return folder / "two.pt2", "2 inputs"
    if kind == "one_size_pt2":  # torch.export without dynamic_shapes: the program holds for 64 x 96 only
        torch.export.save(torch.export.export(samples.made(), (torch.rand(1, 3, 64, 96),)), str(folder / "one.pt2"))
        return folder / "one.pt2", ("exported for 96x64 px (width x height) inputs only: export it again with a "
                                    "dynamic height and width")
    if kind == "flat_pt2":  # the .onnx of such a net is refused by its input's shape: the .pt2 the same way
        torch.export.save(torch.export.export(Flat().eval(), (torch.rand(1, 10),)), str(folder / "flat.pt2"))
        return folder / "flat.pt2", "input 'x' has shape [1, 10]; leanseg needs (N, C, H, W)"
    if kind == "one_size_onnx":  # no dynamic_axes: the resize to the input's size became a constant 64 x 96
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(ResizedToInput().eval(), (torch.rand(1, 3, 64, 96),), str(folder / "fixed.onnx"),
                              opset_version=17, dynamo=False)
        return folder / "fixed.onnx", ("its output is 96x64 px (width x height) whatever the input's size: it was "
                                       "exported for one size; export it again with a dynamic height and width")
    if kind == "five_d_onnx":
        return onnx_of(FiveD(), folder / "five.onnx", (torch.rand(1, 3, 2, 32, 32),), ["image"]), "shape"
    if kind == "not_1khw_onnx":
        return onnx_of(Classifier(), folder / "classifier.onnx", (x,), ["image"]), "(1, K, H, W)"
    if kind == "half_size_onnx":
        half = onnx_of(HalfSize(), folder / "half.onnx", (x,), ["image"])
        return half, "output (4 classes): a segmentation net keeps"
    if kind == "pooled_onnx":  # exported with dynamic axes: "exported for one size" would be wrong advice
        return onnx_of(Pooled(), folder / "pooled.onnx", (x,), ["image"]), "gives a 1x1 output (4 classes)"
    if kind == "pooled_pt2":
        return pt2_of(Pooled(), folder / "pooled.pt2"), "gives a 1x1 output (4 classes)"
    if kind == "flat_pixels_onnx":  # not "not a tensor computed from the input"
        flat = onnx_of(FlatPixels(), folder / "flat.onnx", (x,), ["image"])
        return flat, "the output is (1, 4, 15), not (1, K, H, W)"
    if kind == "flat_pixels_pt2":
        return pt2_of(FlatPixels(), folder / "flat.pt2"), "not (1, K, H, W)"
    if kind == "half_size_pt2":  # the program refuses the small probe sizes: its output's shape is the reason
        half = pt2_of(HalfSize(), folder / "half.pt2")
        return half, "input gives a 80x48 output (4 classes): a segmentation net keeps the input's height and width"
    if kind == "channels_last_pt2":
        return pt2_of(ChannelsLast(), folder / "nhwc.pt2"), "output, channels last: make it return (1, K, H, W)"
    if kind == "squeezed_pt2":
        return pt2_of(Squeezed(), folder / "squeezed.pt2"), "keep the class axis (a binary net: (1, 1, H, W))"
    if kind == "torch_save":
        torch.save(HalfSize().state_dict(), folder / "weights.pt")
        return folder / "weights.pt", "a torch.save file (a state dict or a pickled module), which leanseg does not"
    if kind == "k256_onnx":
        return onnx_of(nn.Conv2d(3, 256, 1), folder / "k256.onnx", (x,), ["image"]), "256 classes"
    if kind == "rgba_pt2":  # four input channels, no card
        rgba = samples.export_pt2(samples.made(in_channels=4), folder / "rgba.pt2", channels=4)
        return rgba, "the graph takes 4 input channels; leanseg gives a net 1 (grey) or 3 (RGB) channels"
    if kind == "rgba_onnx_card":  # and with a card saying 3: the same, not "set input.channels to 4"
        rgba = samples.export_onnx(samples.made(in_channels=4), folder / "rgba.onnx", channels=4)
        samples.write_card(rgba)
        return rgba, "the graph takes 4 input channels"
    if kind == "card_classes":
        shutil.copy(models["onnx"], folder / "wrong.onnx")
        samples.write_card(folder / "wrong.onnx", classes=["a", "b", "c"], colours=[])
        card = folder / "wrong.json"
        return folder / "wrong.onnx", f"the card {card} lists 3 classes, the graph outputs 5: give it 5 names"
    if kind == "card_channels":
        shutil.copy(models["pt2"], folder / "grey.pt2")
        samples.write_card(folder / "grey.pt2", input={"channels": 1, "mean": [0.5], "std": [0.25]})
        return folder / "grey.pt2", (f"the card {folder / 'grey.json'} says 1 input channel, the graph takes 3: set "
                                     "input.channels to 3, with 3 values in input.mean and input.std")
    if kind == "card_multiple":  # TinySegNet runs at multiples of 32 only: 2 x 16 does, 3 x 16 does not
        shutil.copy(models["pt2"], folder / "half.pt2")
        samples.write_card(folder / "half.pt2", input={"channels": 3, "mean": list(samples.MEAN),
                                                       "std": list(samples.STD), "size_multiple": 16})
        return folder / "half.pt2", "says input.size_multiple 16, but the graph runs at multiples of 32: set it to 32"
    if kind == "card_multiple_onnx":  # the same from ONNX, whose failing sizes fx's __call__ would print
        shutil.copy(models["onnx"], folder / "half.onnx")
        samples.write_card(folder / "half.onnx", input={"channels": 3, "mean": list(samples.MEAN),
                                                        "std": list(samples.STD), "size_multiple": 16})
        return folder / "half.onnx", "says input.size_multiple 16, but the graph runs at multiples of 32"
    if kind == "short_text":  # a few bytes that are no model: said as such, not as a cut-short model
        (folder / "notes.txt").write_text("todo\n")
        return folder / "notes.txt", "not a model file leanseg opens"
    if kind == "short_onnx":  # as few bytes under a model's name: cut short
        (folder / "net.onnx").write_bytes(b"\x08\x07")
        return folder / "net.onnx", "file is truncated (2 bytes)"
    if kind == "empty":
        (folder / "empty.pt2").write_bytes(b"")
        return folder / "empty.pt2", "file is empty (0 bytes)"
    if kind == "card_as_model":  # the card given where its model belongs
        return samples.write_card(folder / "mynet.pt2"), "give the model file it describes"
    raise AssertionError(kind)


BAD_KINDS = ["truncated_pt2", "truncated_onnx", "truncated_leanseg", "truncated_safetensors", "two_inputs_onnx",
             "two_inputs_pt2", "one_size_pt2", "flat_pt2", "one_size_onnx", "five_d_onnx", "not_1khw_onnx",
             "half_size_onnx", "torch_save", "k256_onnx", "card_classes", "card_channels", "card_multiple",
             "card_multiple_onnx", "card_as_model", "short_text", "short_onnx", "empty", "rgba_pt2", "rgba_onnx_card",
             "half_size_pt2", "channels_last_pt2", "squeezed_pt2", "pooled_onnx", "pooled_pt2", "flat_pixels_onnx",
             "flat_pixels_pt2"]


@pytest.mark.parametrize("kind", BAD_KINDS)
def test_a_bad_model_file_is_one_line_naming_the_file_and_the_problem(
        kind: str, models: dict[str, Path], image: tuple[Path, np.ndarray], tmp_path: Path,  # noqa: F811
        tiny_checkpoint: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, phrase = bad_file(kind, models, tmp_path, tiny_checkpoint)
    with pytest.raises(CheckpointError) as caught:
        load_model(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and "\n" not in message and phrase in message, message
    assert segment_cli(image[0], path, tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert err == f"leanseg: error: {message}\n"
    assert not (tmp_path / "out").exists()
