"""`leanseg batch --ray` argument handling that needs no cluster: runs whether or not ray is installed."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np

# `leanseg batch` in a fresh interpreter where `import ray` fails, as on a machine without the extra
WITHOUT_RAY = "import sys; sys.modules['ray'] = None; from leanseg.core.cli import main; sys.exit(main(sys.argv[1:]))"


def _batch_without_ray(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", WITHOUT_RAY, "batch", *args], capture_output=True, text=True,
                          timeout=300)


def test_ray_without_ray_installed_says_how_to_install_it(tmp_path: Path, tiny_checkpoint: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    cv2.imwrite(str(inputs / "a.png"), np.zeros((32, 48, 3), np.uint8))
    for address in ([], ["10.0.0.5:6379"]):
        result = _batch_without_ray(str(inputs), "--out", str(tmp_path / "out"), "--model", str(tiny_checkpoint),
                                    "--ray", *address)
        assert result.returncode == 2, result.stdout + result.stderr
        assert "pip install 'leanseg[cluster]'" in result.stderr and "Traceback" not in result.stderr
        assert not (tmp_path / "out").exists()  # nothing started, nothing written


def test_ray_options_are_validated_before_anything_runs(tmp_path: Path, tiny_checkpoint: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    common = [sys.executable, "-m", "leanseg.core", "batch", str(inputs), "--out", str(tmp_path / "out"),
              "--model", str(tiny_checkpoint), "--ray"]
    result = subprocess.run([*common, "--memory-log", str(tmp_path / "m.csv")], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 2 and "drop --memory-log" in result.stderr
    result = subprocess.run([*common, "--actors", "0"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 2 and ("actors must be at least 1" in result.stderr
                                       or "pip install 'leanseg[cluster]'" in result.stderr)
