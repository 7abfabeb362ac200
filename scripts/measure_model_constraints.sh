#!/bin/bash
# Issue 17's constraints on a candidate default model, beside the shipped one in the same run (these machines are
# shared and noisy, so only side-by-side figures compare): parameters and file size (<= 4M, <= 16 MB), lean bf16
# video end to end at 360x480 with its label agreement (>= 12 frames/s, must not get worse), the engine's peak x
# eager at 1024x1024 (`leanseg bench`'s MobileUNet: the shipped architecture, which a candidate of another width
# or decoder would not be), and the val fit (val is in the training frames: fit, not generalisation). Run it with
# nothing else on the machine.
#   scripts/measure_model_constraints.sh CANDIDATE.safetensors OUT-DIR
#     (OUT-DIR/{size.txt, video-{candidate,shipped}.{txt,json}, bench.txt, bench/, eval-val-candidate.{md,json}})
set -euo pipefail
self=$(realpath -- "$0")
if [ $# -ne 2 ]; then sed -n '2,9p' "$self" >&2; exit 2; fi
[ -f "$1" ] || { echo "error: $1: no such file" >&2; exit 1; }
candidate=$(realpath -- "$1") out=$(realpath -m -- "$2")
cd "$(dirname "$self")/.."
shipped=assets/models/camvid_mobileunet.safetensors
mkdir -p "$out"

.venv/bin/python - "$candidate" "$shipped" <<'EOF' | tee "$out/size.txt"
import os, sys
from leanseg.core.model.checkpoint import load_checkpoint
for path in sys.argv[1:]:
    count = sum(p.numel() for p in load_checkpoint(path).model.parameters())
    print(f"{path}: {count:,} parameters, {os.path.getsize(path) / 1e6:.2f} MB")
EOF

for which in candidate shipped; do
  model=$candidate; [ "$which" = shipped ] && model=$shipped
  .venv/bin/python scripts/bench_video.py --model "$model" --configs lean:bf16 --memory-frames 0 \
    --json "$out/video-$which.json" | tee "$out/video-$which.txt"
done
.venv/bin/leanseg bench --inference-sizes 1024 --inference-models MobileUNet --out "$out/bench" | tee "$out/bench.txt"
.venv/bin/leanseg eval --data ../shared/data/camvid --split val --model "$candidate" --mirror off --threads 2 \
  --json "$out/eval-val-candidate.json" | tee "$out/eval-val-candidate.md"
