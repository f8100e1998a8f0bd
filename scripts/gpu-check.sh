#!/usr/bin/env bash
# GPU checks, on a machine with a CUDA GPU: the cuda-marked tests, a short real training run and
# prediction on CUDA, and the benchmark's GPU parts (fp32, bf16 and bf16 + torch.compile
# training samples/s and model FLOPs utilisation from the scaling part; predict throughput from
# the predict part; the training feed's headroom from the feed part).
# Everything it measures lands in benchmarks/results/gpu/ (commit it).
# Usage: bash scripts/gpu-check.sh            (PYTHON=... to use another environment's python)
# On a lent GPU machine with no internet (docs/guide/devices.md): run scripts/device-wheels.sh
# here first, carry .whl, and there:
#   python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
#   PYTHONPATH=/tmp/site PYTHON=python3 bash scripts/gpu-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -z "${PYTHON:-}" ]]; then
    bash scripts/setup.sh --dev
    PYTHON=.venv/bin/python
fi
if ! "$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    echo "error: torch sees no CUDA GPU here; run scripts/gpu-check.sh on a GPU machine" >&2
    exit 1
fi
OUT=benchmarks/results/gpu
mkdir -p "$OUT"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export PYTHONUNBUFFERED=1
"$PYTHON" -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0))" | tee "$OUT/device.txt"

echo "== cuda tests"
# -m cuda selects them; a skipped one fails this check (the GPU is there, so none may skip)
"$PYTHON" -m pytest -m cuda -ra -q tests/parallel/test_cuda.py 2>&1 | tee "$OUT/cuda-tests.txt"
if grep -q "skipped" "$OUT/cuda-tests.txt"; then
    echo "error: cuda tests were skipped on a GPU machine" >&2
    exit 1
fi

echo "== landcover train + predict on CUDA (sample data, default config, 2 epochs)"
SAMPLE=$("$PYTHON" -m landcover data sample)
"$PYTHON" -m landcover train --config configs/default.yaml --data "$SAMPLE" --out "$WORK/run" \
    --epochs 2 --device cuda 2>&1 | tee "$OUT/train.log"
"$PYTHON" -m landcover predict "$SAMPLE/sample_011_naip.tif" --checkpoint "$WORK/run/checkpoints/last.pt" \
    --out "$WORK/maps" --device cuda 2>&1 | tee "$OUT/predict.log"
cp "$WORK/run/metrics.jsonl" "$OUT/train-metrics.jsonl"

echo "== benchmark GPU parts"
"$PYTHON" benchmarks/run.py scaling predict feed --quick --out "$OUT" 2>&1 | tee "$OUT/benchmark.txt"
echo "gpu-check: results in $OUT"
