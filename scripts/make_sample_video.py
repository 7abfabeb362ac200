"""Make assets/samples/camvid_val.mp4 from the consecutive CamVid val frames (run once; committed).

CamVid's sequence 0016E5 was filmed at 30 fps and its val split keeps every second frame, so the
frames listed in val.txt play back at 15 fps. Usage:
    python scripts/make_sample_video.py [CAMVID_DIR] [--frames N] [--out PATH]
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path

from leanseg.core.io.images import read_image, to_rgb8
from leanseg.core.io.video_writer import VideoWriter

ROOT = Path(__file__).resolve().parent.parent
FPS = 15.0  # 30 fps source, every second frame


def val_frames(camvid: Path) -> list[Path]:
    """The val images in val.txt order; checks they are one run of consecutive (step 2) frames."""
    listing = camvid / "val.txt"
    frames = [camvid / line.split()[0] for line in listing.read_text().splitlines() if line.strip()]
    numbers = [int(re.findall(r"(\d+)\.png$", path.name)[0]) for path in frames]
    steps = {b - a for a, b in zip(numbers, numbers[1:])}
    if steps != {2}:
        raise SystemExit(f"{listing}: frames are not consecutive every-second frames (steps {sorted(steps)})")
    return frames


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("camvid", nargs="?", type=Path, default=ROOT.parent / "shared" / "data" / "camvid")
    parser.add_argument("--frames", type=int, default=101, help="how many frames (default: all 101, 6.7 s)")
    parser.add_argument("--out", type=Path, default=ROOT / "assets" / "samples" / "camvid_val.mp4")
    args = parser.parse_args()
    frames = val_frames(args.camvid)[: args.frames]
    first = read_image(frames[0])
    with VideoWriter(args.out, FPS, first.width, first.height) as writer:
        for path in frames:
            writer.write(to_rgb8(read_image(path)))
    size_mb = args.out.stat().st_size / 1e6
    print(f"{args.out}: {len(frames)} frames, {first.width}x{first.height} at {FPS:g} fps, {size_mb:.1f} MB")


if __name__ == "__main__":
    main()
