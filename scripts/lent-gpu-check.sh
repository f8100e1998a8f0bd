#!/usr/bin/env bash
# scripts/gpu-check.sh on a lent GPU machine with no internet and a cap on the files that come
# back: installs the wheels of scripts/device-wheels.sh (carried in .whl/), runs the stages one
# by one, each in its own gpu-check.sh call, and packs the results folder into one tarball
# after every stage, so a call stopped at its time limit still returns what the finished
# stages measured. Unpack it over benchmarks/results/gpu/ to commit the figures.
# Usage: bash scripts/lent-gpu-check.sh [STAGE ...]   (default: every stage, in gpu-check's order)
#        TARBALL=path (default: $OUT/gpu.tgz, else ./gpu-results.tgz)
# Stage times on one H100 (2026-11-27): tests 89 s, smoke 62 s, feed 28 s, predict 331 s (16
# large tiles by 1, 4 and 8 workers and 4 capped; 118 s with PREDICT_SHARED_JOBS=8, one job),
# scaling 333 s (more since its compile reduce-overhead row, perhaps 400 s). A call may run 10
# minutes and a session's device time is 15 minutes, start-up included. The fourth run fitted
# every stage in 770 s by three calls: `tests scaling`, then
# `PREDICT_SHARED_JOBS=8 bash scripts/lent-gpu-check.sh predict`, then `feed smoke`. On one H200
# (2026-11-28): tests 75-83 s, step (issue 43's plain loop against the trainer) 221-239 s.
# Issue 43's whole check in one call of under 8 minutes (the training rows, predict of one
# 7,500 x 6,000 tile with and without probabilities, a 4-tile region job on one worker):
#   PREDICT_SHARED_JOBS=1 PREDICT_SHARED_TILES=4 bash scripts/lent-gpu-check.sh step predict
# and with the CUDA tests first (the captured-step test changed after the H200's last call, and
# since: the feed's copy stream, the average in one buffer; about 80 s more, some 450 s in all):
#   ... lent-gpu-check.sh tests step predict
set -uo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
python3 -m pip install -q --no-index --no-deps --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "error: the wheels in .whl/ did not install (run scripts/device-wheels.sh here first)" >&2; exit 1; }
export PYTHONPATH=$PWD:/tmp/site PYTHON=python3 PYTHONUNBUFFERED=1
RESULTS=$(mktemp -d)
export GPU_CHECK_OUT=$RESULTS
TARBALL=${TARBALL:-${OUT:+$OUT/gpu.tgz}}
TARBALL=${TARBALL:-$PWD/gpu-results.tgz}
nvidia-smi > "$RESULTS/nvidia-smi.txt" 2>&1
nproc > "$RESULTS/nproc.txt"
STAGES=("$@")
if (( ${#STAGES[@]} == 0 )); then
    STAGES=(tests smoke scaling predict feed)
fi
for stage in "${STAGES[@]}"; do
    echo "== $stage at $(( SECONDS - start )) s"
    bash scripts/gpu-check.sh "$stage" > "$RESULTS/stage-$stage.out" 2>&1
    echo "== $stage: exit $? at $(( SECONDS - start )) s"
    tail -25 "$RESULTS/stage-$stage.out"
    tar czf "$TARBALL.part" -C "$RESULTS" . && mv "$TARBALL.part" "$TARBALL"
done
echo "lent-gpu-check: results in $TARBALL"
