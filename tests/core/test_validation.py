"""Model files are outside input: every metadata field is checked before anything is built or written
(issue 18, finding 6), in real `leanseg` processes on real checkpoint files."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from safetensors import safe_open
from safetensors.torch import save_file

from leanseg.core.model import MobileUNetConfig, PlainUNetConfig, config_from_dict
from leanseg.core.model.checkpoint import CheckpointError, load_checkpoint, read_info

from .unwritable import make_unwritable


def _leanseg(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "leanseg.core", *args], capture_output=True, text=True,
                          timeout=300)


def edited_checkpoint(source: Path, target: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    """A copy of `source` whose leanseg metadata went through `edit` (the weights unchanged)."""
    with safe_open(str(source), "pt") as handle:
        meta = json.loads(handle.metadata()["leanseg"])
        tensors = {k: handle.get_tensor(k) for k in handle.keys()}
    edit(meta)
    save_file(tensors, str(target), metadata={"leanseg": json.dumps(meta)})
    return target


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """An edit that sets meta[a][b]... for path 'a.b...' (integer parts index lists)."""
    def edit(meta: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = meta
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        node[int(last) if last.isdigit() else last] = value
    return edit


BAD_METADATA = [
    ("config.stem_channels", 1_000_000_000, "stem_channels must be in 1..4096"),
    ("config.encoder_table.1.2", 10_000_000, r"encoder_table row 1 n \(repeats\) must be in 1..16"),
    ("config.encoder_table.1.0", 10_000, r"encoder_table row 1 t \(expansion\) must be in 1..16"),
    ("config.decoder_channels.0", 1_000_000, r"decoder_channels\[0\] must be in 1..4096"),
    ("config.decoder_expansion", 100_000, "decoder_expansion must be in 1..16"),
    ("config.context_dilations", [2, 100_000], r"context_dilations\[1\] must be in 1..64"),
    ("config.stem_channels", 32.5, "stem_channels must be a whole number"),
    ("class_colours.0", [999, -5, 3], r"class_colours\[0\] values \(R, G, B\) must be in 0..255"),
    ("class_colours.1", [1, 2], r"class_colours\[1\] must be 3 whole numbers"),
    ("mean.0", float("nan"), "mean values must be finite numbers"),
    ("std.2", 0, "std values must be greater than 0"),
    ("std.0", float("inf"), "std values must be finite numbers"),
    ("class_names.0", 7, r"class_names\[0\] must be a string"),
    ("ignore_index", 300, "ignore_index must be a label in 0..255"),
]


@pytest.mark.parametrize(("field", "value", "message"), BAD_METADATA, ids=[b[0] for b in BAD_METADATA])
def test_bad_metadata_is_refused_in_one_line(tmp_path: Path, tiny_checkpoint: Path, field: str, value: Any,
                                             message: str) -> None:
    bad = edited_checkpoint(tiny_checkpoint, tmp_path / "bad.safetensors", _set(field, value))
    with pytest.raises(CheckpointError, match=message):
        read_info(bad)
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(bad)


@pytest.mark.parametrize(("field", "value"), [("config.stem_channels", 1_000_000_000),
                                              ("config.encoder_table.1.2", 10_000_000),
                                              ("class_colours.0", [999, -5, 3]), ("std.0", 0)])
def test_cli_refuses_a_bad_model_before_writing_anything(tmp_path: Path, tiny_checkpoint: Path, rgb_image: Path,
                                                         field: str, value: Any) -> None:
    bad = edited_checkpoint(tiny_checkpoint, tmp_path / "bad.safetensors", _set(field, value))
    out = tmp_path / "out"
    result = _leanseg("segment", str(rgb_image), "--out", str(out), "--model", str(bad), "--device", "cpu")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"leanseg: error: {bad}: invalid model metadata"), result.stderr
    assert not out.exists() or not list(out.iterdir())


# Within every per-field bound, yet 1.4 GB of float32 parameters: only the file's shapes tell.
WIDE_TABLE = [[1, 16, 1, 1], [16, 24, 2, 2], [16, 32, 3, 2], [16, 64, 4, 2], [16, 96, 3, 1], [16, 160, 3, 2],
              [16, 320, 4, 1]]


def test_shapes_are_compared_before_the_model_is_built(tmp_path: Path, tiny_checkpoint: Path) -> None:
    def widen(meta: dict[str, Any]) -> None:
        meta["config"].update(width=4.0, encoder_table=WIDE_TABLE, decoder_expansion=16,
                              decoder_channels=[1024, 512, 256, 128])
        config_from_dict(meta["config"])  # valid: each field in bounds

    bad = edited_checkpoint(tiny_checkpoint, tmp_path / "wide.safetensors", widen)
    probe = (
        "import sys\n"
        "from leanseg.core.model.checkpoint import CheckpointError, load_checkpoint\n"
        "def hwm():\n"
        "    text = open('/proc/self/status').read()\n"
        "    return int(text.split('VmHWM:')[1].split()[0]) * 1024\n"
        "before = hwm()\n"
        "try:\n"
        "    load_checkpoint(sys.argv[1])\n"
        "except CheckpointError as err:\n"
        "    print(err)\n"
        "print(hwm() - before)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe, str(bad)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    message, rise = result.stdout.strip().splitlines()
    assert "weights do not match the model config" in message and "the config needs" in message
    assert int(rise) < 200_000_000, f"loading rose {int(rise) / 1e6:.0f} MB before refusing"


def test_configs_bound_every_size_field() -> None:
    with pytest.raises(ValueError, match="base_channels must be in 1..512"):
        PlainUNetConfig(base_channels=4096, depth=4)
    with pytest.raises(ValueError, match="encoder_table needs 1..16 rows"):
        MobileUNetConfig(encoder_table=[[1, 16, 1, 2]] * 17)
    with pytest.raises(ValueError, match="width must be a number in 0.1..4.0"):
        MobileUNetConfig(width=float("nan"))
    assert MobileUNetConfig(stem_channels=4096).stem_channels == 4096


# --- findings 7-9 through the CLI: --max-pixels, EXIF orientation, errors that were tracebacks ----

def test_max_pixels_exists_where_the_refusal_names_it(tmp_path: Path, tiny_checkpoint: Path) -> None:
    import cv2
    import numpy as np

    folder = tmp_path / "in"
    folder.mkdir()
    image = folder / "big.png"
    cv2.imwrite(str(image), np.zeros((120, 100, 3), np.uint8))
    model = ("--model", str(tiny_checkpoint), "--device", "cpu")
    refused = _leanseg("segment", str(image), "--out", str(tmp_path / "s1"), "--max-pixels", "11999", *model)
    assert refused.returncode == 1 and "exceeds the limit" in refused.stderr and "--max-pixels" in refused.stderr
    assert _leanseg("segment", str(image), "--out", str(tmp_path / "s2"), "--max-pixels", "12000",
                    *model).returncode == 0
    refused = _leanseg("batch", str(folder), "--out", str(tmp_path / "b1"), "--max-pixels", "11999", *model)
    assert refused.returncode == 1 and "exceeds the limit" in refused.stderr, refused.stderr
    for command in ("segment", "batch", "video"):  # each command's own parser, built as `leanseg COMMAND` builds it
        assert "--max-pixels" in command_help(command)


def test_segment_applies_exif_orientation_and_says_so(tmp_path: Path, tiny_checkpoint: Path) -> None:
    import cv2
    import numpy as np

    from .test_images import exif_jpeg

    image = tmp_path / "phone.jpg"
    image.write_bytes(exif_jpeg(np.zeros((40, 64, 3), np.uint8), 6))  # stored landscape, shown portrait
    out = tmp_path / "out"
    result = _leanseg("segment", str(image), "--out", str(out), "--model", str(tiny_checkpoint), "--device", "cpu")
    assert result.returncode == 0, result.stderr
    assert "phone.jpg: rotated 90° clockwise as its EXIF orientation (6) says" in result.stdout
    labels = next(out.glob("phone*_labels.png"))
    assert cv2.imread(str(labels), cv2.IMREAD_UNCHANGED).shape == (64, 40)


@pytest.mark.parametrize("command", ["batch", "segment"])
def test_unwritable_output_folder_is_one_line(tmp_path: Path, tiny_checkpoint: Path, rgb_image: Path,
                                              command: str) -> None:
    read_only = tmp_path / "ro"
    read_only.mkdir()
    source = str(rgb_image.parent) if command == "batch" else str(rgb_image)
    undo = make_unwritable(read_only)
    try:
        result = _leanseg(command, source, *([str(rgb_image)] if command == "segment" else []), "--out",
                          str(read_only), "--model", str(tiny_checkpoint), "--device", "cpu")
    finally:
        undo()
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(read_only) in lines[0] and "Traceback" not in result.stderr, result.stderr


@pytest.mark.parametrize(("option", "value", "message"), [
    ("--threads", "-1", "argument --threads: must be at least 1, got -1"),
    ("--threads", "two", "argument --threads: 'two' is not a whole number"),
    ("--memory-budget", "abc", "argument --memory-budget: cannot read 'abc' as a size; write e.g. 512MB"),
    ("--memory-budget", "0", "argument --memory-budget: cannot use '0' as a size"),
    ("--max-pixels", "0", "argument --max-pixels: must be at least 1, got 0"),
])
def test_bad_option_values_are_usage_errors(tmp_path: Path, rgb_image: Path, option: str, value: str,
                                            message: str) -> None:
    result = _leanseg("segment", str(rgb_image), "--out", str(tmp_path / "o"), option, value)
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr, result.stderr


def test_large_sizes_are_accepted(tmp_path: Path, tiny_checkpoint: Path, rgb_image: Path) -> None:
    result = _leanseg("segment", str(rgb_image), "--out", str(tmp_path / "o"), "--memory-budget", "10TB",
                      "--model", str(tiny_checkpoint), "--device", "cpu")
    assert result.returncode == 0, result.stderr


def command_help(command: str) -> str:
    """`leanseg COMMAND --help`'s text, from the parser the command line builds (in this process)."""
    from leanseg.core.cli import build_parser

    parser = build_parser(only=command)
    subparsers = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    return subparsers.choices[command].format_help()
