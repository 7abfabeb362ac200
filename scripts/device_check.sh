#!/usr/bin/env bash
# Device check for the lean engine on a CUDA GPU (under 5 minutes): the engine's equality and
# accounting tests on CUDA, then a short `leanseg bench` on the GPU (peaks from max_memory_allocated).
# Usage: scripts/device_check.sh [OUT_DIR]   (OUT_DIR default: $OUT or out/device_check)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT_DIR="${1:-${OUT:-out/device_check}}"
mkdir -p "$OUT_DIR"
PY=.venv/bin/python
[ -x "$PY" ] || PY=python3

"$PY" - <<'PYEOF' | tee "$OUT_DIR/device.txt"
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())
if torch.cuda.is_available():
    print(torch.cuda.get_device_name(0))
PYEOF

echo "== engine tests (CUDA ones run here; CPU ones too) =="
timeout 180 "$PY" -m pytest -q tests/core/engine -k "cuda or equals_eager" 2>&1 | tee "$OUT_DIR/tests.txt"

echo "== bench on CUDA =="
timeout 150 "$PY" -m leanseg.core bench --device cuda --inference-sizes 512,1024,2048 \
    --inference-configs "eager no_grad,eager inference_mode,engine fp32,engine bf16" \
    --inference-repeats 3 --question-size 1024 --out "$OUT_DIR" 2>&1 | tee "$OUT_DIR/bench.txt"
