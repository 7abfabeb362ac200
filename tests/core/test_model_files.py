"""Model files of each format (.pt2, .onnx, .leanseg bundle, .safetensors checkpoint) made in the test:
`leanseg segment` labels equal eager PyTorch's; cards honoured or defaults stated; `import-model` and
`models`; and every bad file (truncated, two inputs, 5-D input, wrong output, K > 255, a card that
contradicts the graph) is one CheckpointError line naming the file, and exit code 2 from the CLI."""
from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from leanseg.core.cli import main
from leanseg.core.model.checkpoint import CheckpointError
from leanseg.core.model.graph_model import GraphModel
from leanseg.core.model.sources import describe, load_model

from . import graph_samples as samples

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """tiny.pt2 and tiny.onnx (the same TinySegNet) with their cards, and a .leanseg bundle of the .onnx."""
    folder = tmp_path_factory.mktemp("models")
    model = samples.made()
    pt2 = samples.export_pt2(model, folder / "tiny.pt2")
    onnx_path = samples.export_onnx(model, folder / "tiny.onnx")
    samples.write_card(pt2)
    bundle = folder / "tiny_onnx.leanseg"
    assert main(["import-model", str(onnx_path), "--out", str(bundle)]) == 0
    return {"pt2": pt2, "onnx": onnx_path, "leanseg": bundle}


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray]:
    path = tmp_path_factory.mktemp("image") / "street.png"
    return path, samples.write_image(path, 45, 70)  # not a multiple of 32 either way


def segment_cli(image: Path, model: Path, out: Path, *extra: str) -> int:
    """The CLI's segment, one pass (--mirror off) so its labels compare with one eager forward."""
    return main(["segment", str(image), "--model", str(model), "--out", str(out), "--device", "cpu",
                 "--no-overlay", "--mirror", "off", *extra])


@pytest.mark.parametrize("fmt", ["pt2", "onnx", "leanseg"])
@pytest.mark.parametrize("engine", ["lean", "eager"])
def test_segment_labels_equal_eager_pytorch(fmt: str, engine: str, models: dict[str, Path],
                                            image: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    path, rgb = image
    assert segment_cli(path, models[fmt], tmp_path, "--engine", engine) == 0
    labels = cv2.imread(str(tmp_path / "street_labels.png"), cv2.IMREAD_UNCHANGED)
    expected = samples.eager_labels(samples.made(), rgb)
    assert labels.shape == (45, 70)
    assert len(np.unique(expected)) > 1  # a test that could fail: more than one class predicted
    np.testing.assert_array_equal(labels, expected)


@pytest.mark.parametrize("fmt", ["pt2", "onnx", "leanseg"])
def test_the_card_is_read_and_the_class_count_comes_from_the_graph(fmt: str, models: dict[str, Path]) -> None:
    loaded = load_model(models[fmt])
    assert isinstance(loaded.model, GraphModel)
    info = loaded.info
    assert info.class_names == samples.CLASSES and info.class_colours == samples.COLOURS
    assert info.mean == samples.MEAN and info.std == samples.STD
    assert info.config.num_classes == 5 and loaded.model.size_multiple == 32
    assert "5 classes, size multiple 32" in describe(loaded)


def test_format_comes_from_the_content_not_the_suffix(models: dict[str, Path], tmp_path: Path) -> None:
    disguised = tmp_path / "net.onnx"  # a .pt2 archive under an ONNX name
    shutil.copy(models["pt2"], disguised)
    loaded = load_model(disguised)
    assert loaded.info.provenance["format"] == "pt2"


def test_without_a_card_the_defaults_apply_and_are_said(models: dict[str, Path], tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    bare = tmp_path / "bare.onnx"
    shutil.copy(models["onnx"], bare)
    loaded = load_model(bare)
    assert loaded.info.class_names == tuple(f"class {i}" for i in range(5))
    assert loaded.info.mean == (0.485, 0.456, 0.406) and loaded.info.provenance["card"] == "defaults"
    assert "no card" in describe(loaded) and "ImageNet mean/std" in describe(loaded)
    samples.write_image(tmp_path / "x.png", 40, 64)
    assert main(["segment", str(tmp_path / "x.png"), "--model", str(bare), "--out", str(tmp_path / "out"),
                 "--device", "cpu", "--no-overlay"]) == 0
    assert "note: no card beside" in capsys.readouterr().out


def test_a_grey_model_without_a_card_is_said_to_get_grey_input(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """A 1-channel graph gets the grey defaults (mean 0.5, std 0.25), and its description says so, not ImageNet's."""
    grey = samples.export_onnx(samples.made(in_channels=1), tmp_path / "grey.onnx", channels=1)
    loaded = load_model(grey)
    assert loaded.info.config.in_channels == 1 and loaded.info.mean == (0.5,) and loaded.info.std == (0.25,)
    text = describe(loaded)
    assert "no card: default names, palette, grey input, mean 0.5 / std 0.25" in text and "ImageNet" not in text
    samples.write_card(grey, input={"channels": 1, "mean": [0.5], "std": [0.25]})  # a grey image has no RGB order
    assert main(["import-model", str(grey), "--out", str(tmp_path / "grey.leanseg")]) == 0
    assert "mean [0.5], std [0.25], grey input, logits" in capsys.readouterr().out


def test_a_folder_given_as_the_model_is_named_as_a_folder(image: tuple[Path, np.ndarray], tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert segment_cli(image[0], tmp_path, tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert f"{tmp_path}: is a folder, not a model file" in err and not (tmp_path / "out").exists()


def test_import_model_says_what_it_assumed_and_models_lists_the_bundle(
        models: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    bare = tmp_path / "bare.onnx"
    shutil.copy(models["onnx"], bare)
    user = tmp_path / "user models"
    monkeypatch.setenv("LEANSEG_MODELS_DIR", str(user))
    assert main(["import-model", str(bare)]) == 0  # default --out: the user model folder
    printed = capsys.readouterr().out
    assert "no card beside bare.onnx" in printed and "ImageNet mean/std" in printed and "5 classes" in printed
    assert (user / "bare.leanseg").is_file()
    assert main(["import-model", str(bare)]) == 2  # exists: refused without --overwrite
    assert "--overwrite" in capsys.readouterr().err
    shutil.copy(models["leanseg"], user / "tiny_onnx.leanseg")
    assert main(["models"]) == 0
    listing = capsys.readouterr().out
    assert f"user: {user}" in listing
    assert "tiny_onnx.leanseg: tiny (bundle, 5 classes, size multiple 32" in listing
    assert "bare.leanseg: bare (bundle" in listing
    assert "(read from cards and metadata; --check opens each model)" in listing
    assert main(["models", "--check"]) == 0
    checked = capsys.readouterr().out
    assert "bare.leanseg: opens: bare (bundle, 5 classes, size multiple 32" in checked
    assert checked.rstrip().endswith(" open, 0 cannot be opened")
    (user / "junk.leanseg").write_bytes(b"not a model")
    assert main(["models"]) == 1
    assert "\n  junk.leanseg: cannot be opened: " in capsys.readouterr().out  # the file's name once, then why


def test_import_model_with_a_card_given(models: dict[str, Path], tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    card = samples.write_card(tmp_path / "elsewhere.pt2", name="street net")
    out = tmp_path / "street.leanseg"
    assert main(["import-model", str(models["onnx"]), "--card", str(card), "--out", str(out)]) == 0
    assert f"card {card}" in capsys.readouterr().out
    loaded = load_model(out)
    assert loaded.info.provenance["name"] == "street net" and loaded.info.class_names == samples.CLASSES
    assert main(["import-model", str(tmp_path), "--out", str(out)]) == 2  # refused before --out is looked at
    assert capsys.readouterr().err.endswith(f"{tmp_path}: is a folder; import-model takes a .pt2 or an .onnx file\n")
    assert main(["import-model", str(models["onnx"]), "--card", str(tmp_path / "no.json"), "--out", str(out)]) == 2
    assert capsys.readouterr().err == f"leanseg: error: {tmp_path / 'no.json'}: no such card file\n"


# --- bad model files: each one CheckpointError line naming the file, and exit code 2 from the CLI ---


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


def bad_file(kind: str, models: dict[str, Path], folder: Path, checkpoint: Path) -> tuple[Path, str]:
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
             "half_size_pt2", "channels_last_pt2", "squeezed_pt2"]


@pytest.mark.parametrize("kind", BAD_KINDS)
def test_a_bad_model_file_is_one_line_naming_the_file_and_the_problem(
        kind: str, models: dict[str, Path], image: tuple[Path, np.ndarray], tmp_path: Path,
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


def test_a_card_that_is_not_json_is_one_line(models: dict[str, Path], tmp_path: Path) -> None:
    shutil.copy(models["onnx"], tmp_path / "net.onnx")
    (tmp_path / "net.json").write_text(json.dumps({"card_version": 1, "input": {"channels": 3, "std": [0, 1, 1]}}))
    with pytest.raises(CheckpointError, match=r"net\.json: input\.mean must be finite and input\.std finite and > 0"):
        load_model(tmp_path / "net.onnx")


@pytest.mark.parametrize(("card", "phrase"), [
    ({"classes": ["a"]}, 'no card_version; a card starts {"card_version": 1'),
    ({"card_version": 1, "clases": ["a"]}, 'unknown key "clases"; did you mean "classes"?'),
    ({"card_version": 1, "class_names": ["a"]}, 'unknown key "class_names"; did you mean "classes"?'),
    ({"card_version": 1, "names": ["a"]}, 'unknown key "names"; did you mean "classes"?'),
    ({"card_version": 1, "mean": [0.5, 0.5, 0.5]}, '"mean" belongs inside "input"'),
    ({"card_version": 1, "input": {"size_multiples": 32}}, 'did you mean "input.size_multiple"?'),
    ({"card_version": 1, "input": {"mean": [123.7, 116.3, 103.5], "std": [58.4, 57.1, 57.4]}},
     "on the 0..255 scale, divide both by 255"),
])
def test_a_card_slip_is_named_not_read_as_a_default(card: dict, phrase: str, models: dict[str, Path],
                                                    tmp_path: Path) -> None:
    """A misspelt key, one at the wrong level or a 0..255 mean would leave the default in use, silently."""
    shutil.copy(models["onnx"], tmp_path / "net.onnx")
    (tmp_path / "net.json").write_text(json.dumps(card))
    with pytest.raises(CheckpointError) as caught:
        load_model(tmp_path / "net.onnx")
    assert str(caught.value).startswith(f"{tmp_path / 'net.json'}: ") and phrase in str(caught.value)


def test_keys_this_version_does_not_read_are_kept_and_colors_is_colours(models: dict[str, Path],
                                                                        tmp_path: Path) -> None:
    shutil.copy(models["onnx"], tmp_path / "net.onnx")
    colours = [[10 * i, 20, 30] for i in range(len(samples.CLASSES))]
    card = {"card_version": 1, "classes": list(samples.CLASSES), "colors": colours, "license": "MIT",
            "weight": "random", "architecure": "a typo in free text changes nothing", "input": {"ranges": "0..1"}}
    (tmp_path / "net.json").write_text(json.dumps(card))
    loaded = load_model(tmp_path / "net.onnx")
    assert [list(c) for c in loaded.info.class_colours] == colours


def test_ray_ships_a_graph_model_as_a_bundle_with_its_card(models: dict[str, Path], tmp_path: Path) -> None:
    from leanseg.core.cluster.ray_batch import _checkpoint_bytes

    loaded = load_model(models["pt2"])
    shipped = tmp_path / "model.safetensors"  # the name the actors write the bytes under
    shipped.write_bytes(_checkpoint_bytes(loaded))
    on_actor = load_model(shipped)
    assert on_actor.info.provenance["format"] == "bundle"
    assert on_actor.info.class_names == samples.CLASSES and on_actor.info.mean == samples.MEAN
    x = torch.randn(1, 3, 45, 70)
    with torch.inference_mode():
        assert torch.equal(on_actor.model(x), loaded.model(x))


def test_the_memory_lab_spec_of_a_graph_model_is_its_file(models: dict[str, Path]) -> None:
    from leanseg.core.profile.model_spec import ModelSpec

    spec = ModelSpec.for_loaded(load_model(models["onnx"]))
    assert spec.path == str(models["onnx"]) and "onnx" in spec.describe()
    assert ModelSpec.from_dict(spec.to_dict()).load().info.config.num_classes == 5


def test_an_installed_model_is_found_by_its_name(models: dict[str, Path], image: tuple[Path, np.ndarray],
                                                 tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    installed = tmp_path / "installed"
    installed.mkdir()
    shutil.copy(models["leanseg"], installed / "streets.leanseg")
    monkeypatch.setenv("LEANSEG_MODELS_DIR", str(installed))
    monkeypatch.chdir(tmp_path)  # no file named streets here: the name is looked up
    for name in ("streets", "streets.leanseg"):
        assert segment_cli(image[0], Path(name), tmp_path / name) == 0
        assert (tmp_path / name / "street_labels.png").is_file()
    # the card's name, the file it was found as, and its class count
    assert f"model tiny ({installed / 'streets.leanseg'}; 5 classes) on cpu" in capsys.readouterr().out
    assert segment_cli(image[0], Path("roads"), tmp_path / "none") == 2
    assert "roads: no such file, nor an installed model of that name (`leanseg models`" in capsys.readouterr().err
    assert not (tmp_path / "none").exists()
