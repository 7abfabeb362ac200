#!/bin/bash
# Rules 21 and 23 on one held-out-sequence fold: three 20-epoch full-size fine-tunes of a parent's fold weights
# (B3 lr 5e-4 seed 0; C3 lr 1e-3 seed 1; E3 lr 1e-3 seed 3 with class weights ^0.25), their uniform average, and
# each scored fp32 on the held-out sequence. A fine-tune carries on from its last.pt (`--resume`; one that ran all
# 20 epochs runs none); one already scored (its runs/eval-*.txt has a mean IoU line) is skipped, so a session can
# carry on from the committed weights of the fine-tunes that finished.
#   scripts/fold_finetunes.sh SEQ PARENT.safetensors TAG     (runs/fold-SEQ-TAG-{b3,c3,e3,s3}, runs/eval-SEQ-TAG-*.txt)
set -u
cd "$(dirname "$0")/.."
source scripts/fold_lib.sh
SEQ=$1 PARENT=$2 TAG=$3
for name in "${FINETUNES[@]}"; do
  out=runs/fold-$SEQ-$TAG-$name report=runs/eval-$SEQ-$TAG-$name.txt
  if [ -f "$out/best.safetensors" ] && grep -qi 'mean IoU' "$report" 2>/dev/null; then
    echo "$(date +%T) $name already scored: $(grep -i 'mean IoU' "$report")"
    continue
  fi
  run_finetune "$name" "$PARENT" "$out" --holdout-sequence "$SEQ" --val-every 20
  fold_score "$SEQ" "$out/best.safetensors" "$report"
done
average_finetunes "runs/fold-$SEQ-$TAG"
fold_score "$SEQ" "runs/fold-$SEQ-$TAG-s3/best.safetensors" "runs/eval-$SEQ-$TAG-s3.txt"
