#!/usr/bin/env bash
# The main job end to end on the built-in synthetic sample: set up, train a U-Net with
# 2 data-parallel workers, and leave a readable run folder in runs/demo.
# Usage: bash scripts/demo.sh [extra landcover train flags]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/landcover train --config configs/cpu.yaml --workers 2 --out runs/demo "$@"
echo
echo "run folder: runs/demo (config.yaml, metrics.jsonl, curves.png, tensorboard/, checkpoints/)"
tail -n 1 runs/demo/metrics.jsonl | .venv/bin/python -c 'import json,sys; r=json.loads(sys.stdin.read()); print(f"epoch {r[\"epoch\"]}: val mIoU {r[\"val_miou\"]:.3f}, pixel accuracy {r[\"val_accuracy\"]:.3f}")'
