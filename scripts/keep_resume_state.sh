#!/bin/bash
# Keep a training run's resume state in git across a session end: runs/RUN/last.pt split into parts under 20 MB,
# its SHA-256, history.json and a README that says how to put it back, in docs/measurements/issue17/resume/RUN/,
# committed. The next session reassembles it and carries the run on with the same command and --resume.
#   scripts/keep_resume_state.sh RUN "AFTER (e.g. epoch 92)" "HOW TO CARRY ON (the command, with --resume)"
set -eu
cd "$(dirname "$0")/.."
RUN=$1 AFTER=$2 CARRY_ON=$3
SRC=runs/$RUN DEST=docs/measurements/issue17/resume/$RUN
[ -f "$SRC/last.pt" ] || { echo "error: $SRC/last.pt: no resume state to keep" >&2; exit 1; }
git rm -rq --ignore-unmatch "$DEST"
rm -rf "$DEST"
mkdir -p "$DEST"
split -b 15M "$SRC/last.pt" "$DEST/last.pt.part-"
(cd "$SRC" && sha256sum last.pt) > "$DEST/last.pt.sha256"
cp "$SRC/history.json" "$DEST/"
cat > "$DEST/README.md" <<README
The run $SRC after $AFTER: its resume state, last.pt, in parts under 20 MB.
To carry it on, from the repo root:
  mkdir -p $SRC && cat $DEST/last.pt.part-* > $SRC/last.pt && cp $DEST/history.json $SRC/
  (cd $SRC && sha256sum -c ../../$DEST/last.pt.sha256)
  then $CARRY_ON
Delete this folder once the run ends.
README
git add "$DEST"
git commit -qm "Issue 17: $RUN's resume state after $AFTER, in parts (carried on next session with --resume)" -- "$DEST"
git log --oneline -1
