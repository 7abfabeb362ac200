"""Peak memory of the zoo's models as their users run them: the original nn.Module (smp / torchvision),
eager under no_grad, measured as `leanseg bench --zoo` measures (peak RSS above the baseline, every
allocation over 64 KB mapped, after 2 warm-up runs; one process per model).

Runs in the zoo's own environment (it imports segmentation_models_pytorch and torchvision):

    .venv-zoo/bin/python scripts/zoo_module_eager_peak.py 1024 [NAME ...] > out/zoo_module_eager.json
"""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import torch

BUILD = Path(__file__).resolve().parents[1].parent / "shared" / "zoo" / "build.py"


def _status_kb(key: str) -> int:
    line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith(key + ":"))
    return int(line.split()[1])


def _zoo_build():
    spec = importlib.util.spec_from_file_location("zoo_build", BUILD)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def measure(name: str, size: int) -> dict:
    """The child: build the model as build.py does (seed 0), warm up, then the peak of 3 runs."""
    build = _zoo_build()
    torch.manual_seed(0)
    model = next(m for n, _, m in build.models() if n == name)
    build.randomise_batchnorm(model)
    model.eval()
    torch.set_num_threads(2)
    x = torch.rand(1, 3, size, size, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        for _ in range(2):
            model(x)
        Path("/proc/self/clear_refs").write_text("5")
        baseline = _status_kb("VmRSS") * 1024
        for _ in range(3):
            model(x)
    return {"model": name, "size": size, "peak_bytes": _status_kb("VmHWM") * 1024 - baseline,
            "torch": torch.__version__}


def main() -> None:
    size = int(sys.argv[1])
    if len(sys.argv) > 2 and sys.argv[2] == "--child":
        print(json.dumps(measure(sys.argv[3], size)))
        return
    names = sys.argv[2:] or [n for n, _, _ in _zoo_build().models()]
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    rows = []
    for name in names:
        out = subprocess.run([sys.executable, __file__, str(size), "--child", name], env=env, check=True,
                             capture_output=True, text=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
        print(f"{name}: {rows[-1]['peak_bytes'] / 2**20:.1f} MB", file=sys.stderr)
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
