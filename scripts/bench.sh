#!/usr/bin/env bash
# Sets up .venv with the dev and benchmark extras (torchgeo, the io and train parts' baseline)
# and Azurite (the load part's blob server), then runs the benchmark suite.
# Re-running skips the installs when nothing changed.
# Usage: bash scripts/bench.sh [all|io|train|scaling|predict|load|model ...] [--quick] [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --dev
if ! .venv/bin/python -c "import torchgeo, lightning" 2>/dev/null; then
    echo "installing the benchmark extras (torchgeo, lightning) into .venv" >&2
    .venv/bin/python -m pip install --quiet -e ".[dev,bench]"
fi
bash scripts/install-azurite.sh
exec .venv/bin/python benchmarks/run.py "$@"
