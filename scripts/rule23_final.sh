#!/bin/bash
# Rule 23's train + val fit (docs/measurements/issue17/rule23.txt; all three folds passed): rule 22's 400-epoch
# command L on all 468 train + val frames (rule 20's fit with --epochs 400; carries on from runs/final-400/last.pt
# where there is one), then rule 21's three 20-epoch full-size fine-tunes from it (B3 lr 5e-4 seed 0; C3 lr 1e-3
# seed 1; E3 lr 1e-3 seed 3, class weights ^0.25) and their uniform average, runs/final-400-s3/best.safetensors.
# Nothing is scored: val is in the training frames. Each step carries on with --resume; one that finished runs
# no epochs.
#   scripts/rule23_final.sh      (runs/final-400, runs/final-400-{b3,c3,e3,s3}, their .log files)
set -u
cd "$(dirname "$0")/.."
source scripts/fold_lib.sh
FIT=(--train-splits train,val --val-split none)
echo "$(date +%T) start L"
nice -n 5 .venv/bin/leanseg train "${FOLD_RECIPE[@]}" "${FIT[@]}" --out runs/final-400 --epochs 400 \
  --finetune-full-epochs 20 --resume >> runs/final-400.log 2>&1 || { echo "L failed: runs/final-400.log"; exit 1; }
for name in "${FINETUNES[@]}"; do
  run_finetune "$name" runs/final-400/best.safetensors "runs/final-400-$name" "${FIT[@]}"
done
average_finetunes runs/final-400
echo "$(date +%T) done: runs/final-400-s3/best.safetensors"
