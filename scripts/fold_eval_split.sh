#!/bin/bash
# /tmp/ev, an eval folder whose split SEQ is a held-out sequence's train + val frames (`leanseg eval --split` takes
# one split's list; a sequence spans both): scripts/fold_eval_split.sh SEQ   (then --data /tmp/ev --split SEQ)
set -u
cd "$(dirname "$0")/.."
SEQ=$1
CAMVID=$(cd ../shared/data/camvid && pwd)
if [ ! -e "/tmp/ev/$SEQ.txt" ]; then
  mkdir -p /tmp/ev
  for d in train trainannot val valannot; do ln -sfn "$CAMVID/$d" "/tmp/ev/$d"; done
  cat "$CAMVID/train.txt" "$CAMVID/val.txt" | grep "/$SEQ" > "/tmp/ev/$SEQ.txt"
fi
