#!/usr/bin/env bash
# The main job end to end on the built-in synthetic sample:
#   set up .venv, train a U-Net with 2 data-parallel workers, predict a held-out tile into a
#   georeferenced map, and evaluate on freshly generated unseen tiles.
# Everything lands in runs/demo. Usage: bash scripts/demo.sh [extra landcover train flags]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
LC=.venv/bin/landcover
RUN=runs/demo

$LC train --config configs/cpu.yaml --workers 2 --out "$RUN" "$@"

SAMPLE=$($LC data sample)
$LC predict "$SAMPLE/sample_011_naip.tif" --checkpoint "$RUN/checkpoints/best.pt" --out "$RUN/predictions"

$LC data synth "$RUN/unseen" --tiles 2 --size 512 --seed 2026 --prefix unseen --overwrite
$LC evaluate --checkpoint "$RUN/checkpoints/best.pt" --data "$RUN/unseen" --out "$RUN/evaluation"

echo
echo "run folder $RUN: config.yaml, metrics.jsonl, curves.png, tensorboard/, checkpoints/"
echo "maps:       $RUN/predictions/sample_011_naip_{class,prob}.tif, _preview.png"
echo "evaluation: $RUN/evaluation/metrics.json, confusion.csv, confusion.png"
echo "notebook:   notebooks/explore_outputs.ipynb (RUN_DIR=$RUN, PREDICT_DIR=$RUN/predictions)"
