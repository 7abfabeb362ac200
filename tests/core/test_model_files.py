"""Model files of each format (.pt2, .onnx, .leanseg bundle, .safetensors checkpoint) made in the test:
`leanseg segment` labels equal eager PyTorch's; cards honoured or defaults stated; `import-model` and
`models`; and every bad file (truncated, two inputs, 5-D input, wrong output, K > 255, a card that
contradicts the graph) is one CheckpointError line naming the file, and exit code 2 from the CLI."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

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
    ({"card_version": 1, "input": {"channels": 1, "mean": [0.5, 0.5, 0.5], "std": [0.2, 0.2, 0.2]}},
     "input.mean and input.std need 1 value each (a grey input), got [0.5, 0.5, 0.5], [0.2, 0.2, 0.2]"),
    ({"card_version": 1, "input": {"mean": "0.5"}}, 'input.mean must be a list of numbers, got "0.5"'),
    ({"card_version": 1, "input": {"channels": "3"}}, 'input.channels must be a whole number, got "3"'),
    ({"card_version": 1, "input": {"size_multiple": 2.5}}, "input.size_multiple must be a whole number, got 2.5"),
    ({"card_version": 1, "classes": "sky road"}, 'classes must be a list of class names, got "sky road"'),
    ({"card_version": 1, "colours": [[0, 0, "red"]]}, 'colours[0] must be a list of 3 integers 0..255, got [0, 0, '),
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
