# Sourced by the held-out-sequence fold scripts (rule23_fold.sh, fold_finetunes.sh) and the train + val fit
# (rule23_final.sh), from the repo root: FOLD_RECIPE, the kept recipe's training options (rule 16's, the shipped
# model's), rule 21's fine-tunes (run_finetune, average_finetunes) and fold_score.

FOLD_RECIPE=(--data ../shared/data/camvid --model MobileUNet --width 0.75 --scale-range 0.5 2.0 --jitter 0.3
             --ema 0.995 --label-smoothing 0.05 --weight-decay 0.01 --precision bf16 --threads 2)

# Rule 21's three 20-epoch full-size fine-tunes of a parent, by name, and their own options (the folds' and the
# train + val fit's alike).
FINETUNES=(b3 c3 e3)
declare -A FINETUNE_OPTIONS=([b3]="--lr 5e-4 --seed 0" [c3]="--lr 1e-3 --seed 1"
                             [e3]="--lr 1e-3 --seed 3 --class-weighting 0.25")

# run_finetune NAME PARENT OUT DATA-OPTIONS...: fine-tune NAME of PARENT into OUT (its log OUT.log), carried on from
# OUT/last.pt where there is one; DATA-OPTIONS say which frames it trains on. Exits the script if it fails.
run_finetune() {
  local name=$1 parent=$2 out=$3; shift 3
  echo "$(date +%T) start $name"
  # shellcheck disable=SC2086  # the options are words
  nice -n 5 .venv/bin/leanseg train "${FOLD_RECIPE[@]}" "$@" --init-from "$parent" --epochs 20 \
    --finetune-full-epochs 20 --out "$out" --resume ${FINETUNE_OPTIONS[$name]} >> "$out.log" 2>&1 \
    || { echo "$name failed: $out.log"; exit 1; }
}

# average_finetunes PREFIX: the uniform average of PREFIX-{b3,c3,e3}/best.safetensors in PREFIX-s3/best.safetensors.
average_finetunes() {
  local prefix=$1 name inputs=()
  for name in "${FINETUNES[@]}"; do inputs+=("$prefix-$name/best.safetensors"); done
  mkdir -p "$prefix-s3"
  .venv/bin/python scripts/average_weights.py "$prefix-s3/best.safetensors" "${inputs[@]}"
}

# fold_score SEQ MODEL REPORT: MODEL scored fp32 on the held-out sequence SEQ (all its train + val frames), the
# table in REPORT, its mean IoU line echoed. `leanseg eval --split` takes one split's list and a sequence spans two,
# so /tmp/ev is a data folder whose split SEQ lists them.
fold_score() {
  local seq=$1 model=$2 report=$3 camvid
  if [ ! -e "/tmp/ev/$seq.txt" ]; then
    camvid=$(cd ../shared/data/camvid && pwd)
    mkdir -p /tmp/ev
    for d in train trainannot val valannot; do ln -sfn "$camvid/$d" "/tmp/ev/$d"; done
    cat "$camvid/train.txt" "$camvid/val.txt" | grep "/$seq" > "/tmp/ev/$seq.txt"
  fi
  .venv/bin/leanseg eval --data /tmp/ev --split "$seq" --model "$model" --mirror off --threads 2 > "$report" 2>&1
  echo "$(date +%T) $report: $(grep -i 'mean IoU' "$report")"
}
