# Sourced by the held-out-sequence fold scripts (rule23_fold.sh, fold_finetunes.sh), from the repo root:
# FOLD_RECIPE, the kept recipe's training options (rule 16's, the shipped model's), and fold_score.

FOLD_RECIPE=(--data ../shared/data/camvid --model MobileUNet --width 0.75 --scale-range 0.5 2.0 --jitter 0.3
             --ema 0.995 --label-smoothing 0.05 --weight-decay 0.01 --precision bf16 --threads 2)

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
