#!/bin/bash
# Rules 21 and 23 on one held-out-sequence fold: three 20-epoch full-size fine-tunes of a parent's fold weights
# (B3 lr 5e-4 seed 0; C3 lr 1e-3 seed 1; E3 lr 1e-3 seed 3 with class weights ^0.25), their uniform average, and
# each scored fp32 on the held-out sequence. A fine-tune carries on from its last.pt (`--resume`; one that ran all
# 20 epochs runs none).
#   scripts/fold_finetunes.sh SEQ PARENT.safetensors TAG     (runs/fold-SEQ-TAG-{b3,c3,e3,s3}, runs/eval-SEQ-TAG-*.txt)
set -u
cd "$(dirname "$0")/.."
SEQ=$1 PARENT=$2 TAG=$3
scripts/fold_eval_split.sh "$SEQ"
COMMON=(--data ../shared/data/camvid --model MobileUNet --width 0.75 --scale-range 0.5 2.0 --jitter 0.3 --ema 0.995
        --label-smoothing 0.05 --weight-decay 0.01 --precision bf16 --threads 2 --holdout-sequence "$SEQ"
        --init-from "$PARENT" --epochs 20 --finetune-full-epochs 20 --val-every 20)
score() {  # run folder, name
  .venv/bin/leanseg eval --data /tmp/ev --split "$SEQ" --model "$1/best.safetensors" --mirror off --threads 2 \
    > "runs/eval-$SEQ-$TAG-$2.txt" 2>&1
  echo "$(date +%T) $2: $(grep -i 'mean IoU' "runs/eval-$SEQ-$TAG-$2.txt")"
}
finetune() {  # name, its own options
  local name=$1; shift
  local out=runs/fold-$SEQ-$TAG-$name
  echo "$(date +%T) start $name"
  nice -n 5 .venv/bin/leanseg train "${COMMON[@]}" --out "$out" --resume "$@" >> "$out.log" 2>&1 \
    || { echo "$name failed: $out.log"; exit 1; }
  score "$out" "$name"
}
finetune b3 --lr 5e-4 --seed 0
finetune c3 --lr 1e-3 --seed 1
finetune e3 --lr 1e-3 --seed 3 --class-weighting 0.25
mkdir -p "runs/fold-$SEQ-$TAG-s3"
.venv/bin/python scripts/average_weights.py "runs/fold-$SEQ-$TAG-s3/best.safetensors" \
  "runs/fold-$SEQ-$TAG-"{b3,c3,e3}/best.safetensors
score "runs/fold-$SEQ-$TAG-s3" s3
