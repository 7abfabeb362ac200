"""Copy a few CamVid val frames into assets/samples/ (run once; the copies are committed)."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CAMVID = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT.parent / "shared" / "data" / "camvid"
FRAMES = ["0016E5_07959", "0016E5_08019", "0016E5_08079", "0016E5_08119", "0016E5_08159"]

if __name__ == "__main__":
    out = ROOT / "assets" / "samples"
    out.mkdir(parents=True, exist_ok=True)
    for name in FRAMES:
        shutil.copyfile(CAMVID / "val" / f"{name}.png", out / f"camvid_{name}.png")
        print(out / f"camvid_{name}.png")
