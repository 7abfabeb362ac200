"""`--model NAME` takes the name `leanseg models` shows (the card's) as well as the file's stem: installed with
`leanseg import-model`, one model by its card name; two sharing it refused, naming both files; a near miss
answered with "did you mean"."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from leanseg.core.cli import main

from . import graph_samples as samples

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """unet.leanseg, imported from unet.onnx with a card whose name is 'myunet' (not the file's)."""
    folder = tmp_path_factory.mktemp("made")
    onnx_path = samples.export_onnx(samples.made(), folder / "unet.onnx")
    samples.write_card(onnx_path, name="myunet")
    out = folder / "unet.leanseg"
    assert main(["import-model", str(onnx_path), "--out", str(out)]) == 0
    return out


@pytest.fixture
def installed(bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user model folder holding unet.leanseg; the working folder has no file of that name."""
    folder = tmp_path / "models"
    folder.mkdir()
    shutil.copy(bundle, folder / "unet.leanseg")
    monkeypatch.setenv("LEANSEG_MODELS_DIR", str(folder))
    monkeypatch.chdir(tmp_path)
    return folder


def _segment(model: str, out: Path) -> int:
    image = out.parent / "street.png"
    if not image.exists():
        samples.write_image(image)
    return main(["segment", str(image), "--model", model, "--out", str(out), "--device", "cpu", "--no-overlay",
                 "--mirror", "off", "--threads", "1"])


def test_the_name_models_lists_is_accepted(installed: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models"]) == 0
    assert "unet.leanseg: myunet (bundle" in capsys.readouterr().out
    for name in ("myunet", "MyUNet", "unet"):  # the card's name (any case) and the file's stem
        assert _segment(name, tmp_path / name) == 0, capsys.readouterr().err
        assert (tmp_path / name / "street_labels.png").is_file()
        # one bracket: the card's name, then the file and what the model is
        assert f"model myunet ({installed / 'unet.leanseg'}; 5 classes) on cpu" in capsys.readouterr().out


def test_a_name_two_models_share_is_refused_naming_both(installed: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy(installed / "unet.leanseg", installed / "unet_v2.leanseg")  # the same card, so the same name
    assert _segment("myunet", tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert (f"myunet: 2 installed models have that name ({installed / 'unet.leanseg'}, "
            f"{installed / 'unet_v2.leanseg'}); give the file's name instead (unet or unet_v2)") in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "out").exists()
    assert _segment("unet_v2", tmp_path / "out") == 0  # the stem still picks one


def test_a_near_miss_is_answered_with_the_close_name(installed: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert _segment("myunett", tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert ("myunett: no such file, nor an installed model of that name; did you mean myunet (unet.leanseg)? "
            "(`leanseg models` lists them") in err
    assert _segment("roads", tmp_path / "out") == 2  # nothing close: no guess
    err = capsys.readouterr().err
    assert "roads: no such file, nor an installed model of that name (`leanseg models`" in err
    assert "did you mean" not in err and not (tmp_path / "out").exists()


def test_a_model_name_is_looked_up_in_the_user_folder_before_the_shipped_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from leanseg.core.model.catalog import model_path_argument

    user, assets = tmp_path / "user", tmp_path / "assets"
    (assets / "models").mkdir(parents=True)
    user.mkdir()
    for folder in (user, assets / "models"):
        (folder / "roads.onnx").write_bytes(b"x")
    (assets / "models" / "shipped.safetensors").write_bytes(b"x")
    monkeypatch.setenv("LEANSEG_MODELS_DIR", str(user))
    monkeypatch.setenv("LEANSEG_ASSETS", str(assets))
    monkeypatch.chdir(tmp_path)
    assert model_path_argument("roads") == user / "roads.onnx"
    assert model_path_argument("shipped") == assets / "models" / "shipped.safetensors"
    assert model_path_argument("elsewhere/roads") == Path("elsewhere/roads")  # a path is a path
    assert model_path_argument("~nosuchuser/net.pt2") == Path("~nosuchuser/net.pt2")  # no traceback


def test_profile_and_find_model_look_a_name_up_as_segment_does(installed: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """One lookup for every --model: the file's stem, the card's name, a path as given; a near miss refused by
    `leanseg profile` with segment's words, before any profiling."""
    from leanseg.core.model.model_names import ModelNameError, find_model

    assert find_model("unet") == find_model("myunet") == find_model(Path("MyUNet")) == installed / "unet.leanseg"
    assert find_model("elsewhere/unet") == Path("elsewhere/unet")  # a path is a path, even when missing
    with pytest.raises(ValueError, match="did you mean myunet"):  # argparse-friendly: a ValueError
        find_model("myunett")
    assert issubclass(ModelNameError, ValueError)
    assert main(["profile", "--model", "myunett", "--device", "cpu"]) == 2
    captured = capsys.readouterr()
    assert captured.err == ("leanseg: error: myunett: no such file, nor an installed model of that name; did you "
                            "mean myunet (unet.leanseg)? (`leanseg models` lists them; `leanseg import-model` "
                            "installs one)\n")
    assert "profiling" not in captured.out
