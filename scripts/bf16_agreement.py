"""bf16 against fp32 labels on the sample images (or any images): share of pixels that agree.

    .venv/bin/python scripts/bf16_agreement.py [IMAGE ...] [--model M]

Both run through the lean engine on the CPU at the images' own size; bar (issue 11): >= 99.5%.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from leanseg.core.assets import default_model_path
from leanseg.core.io.images import read_image
from leanseg.core.model.checkpoint import load_checkpoint
from leanseg.core.predict import InferenceOptions, Segmenter

SAMPLES = sorted((Path(__file__).resolve().parents[1] / "assets" / "samples").glob("*.png"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("images", nargs="*", type=Path, default=SAMPLES)
    parser.add_argument("--model", type=Path, default=default_model_path())
    args = parser.parse_args()
    loaded = load_checkpoint(args.model)
    fp32 = Segmenter(loaded, InferenceOptions(device="cpu"))
    bf16 = Segmenter(loaded, InferenceOptions(device="cpu", precision="bf16"))
    same = total = 0
    for path in args.images:
        image = read_image(path)
        reference, labels = fp32.segment(image).labels, bf16.segment(image).labels
        agree = int((reference == labels).sum())
        same, total = same + agree, total + reference.size
        print(f"{path.name}  {image.width}x{image.height}  {100 * agree / reference.size:.3f}%")
    print(f"all {len(args.images)} images: {100 * same / max(1, total):.3f}% of labels agree (bar 99.5%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
