#!/bin/bash
# Rule 23 on one held-out-sequence fold (docs/measurements/issue17/rule23.txt): rule 22's 400-epoch command L
# (carries on from runs/fold-SEQ-400/last.pt where there is one), L scored fp32 on the held-out sequence, then
# rule 21's three fine-tunes from L and their average (scripts/fold_finetunes.sh).
#   scripts/rule23_fold.sh SEQ      (runs/fold-SEQ-400, runs/eval-SEQ-400.txt, then fold_finetunes.sh's outputs)
set -u
cd "$(dirname "$0")/.."
source scripts/fold_lib.sh
SEQ=$1
echo "$(date +%T) start L $SEQ"
nice -n 5 .venv/bin/leanseg train "${FOLD_RECIPE[@]}" --holdout-sequence "$SEQ" --out "runs/fold-$SEQ-400" \
  --epochs 400 --finetune-full-epochs 20 --val-every 400 --resume >> "runs/fold-$SEQ-400.log" 2>&1 \
  || { echo "L failed: runs/fold-$SEQ-400.log"; exit 1; }
fold_score "$SEQ" "runs/fold-$SEQ-400/best.safetensors" "runs/eval-$SEQ-400.txt"
exec scripts/fold_finetunes.sh "$SEQ" "runs/fold-$SEQ-400/best.safetensors" 400
