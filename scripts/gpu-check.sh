#!/usr/bin/env bash
# GPU checks, on a machine with a CUDA GPU: the cuda-marked tests, a short real training run and
# prediction on CUDA, and the benchmark's GPU parts (fp32, bf16 and bf16 + torch.compile
# training samples/s and model FLOPs utilisation from the scaling part; predict throughput from
# the predict part; the training feed's headroom from the feed part).
# Everything it measures lands in benchmarks/results/gpu/ (commit it).
# Usage: bash scripts/gpu-check.sh [STAGE ...]   (PYTHON=... to use another environment's python;
#        GPU_CHECK_OUT=DIR for another results folder)
# STAGE: tests, smoke (train + predict), scaling, predict, feed, step (the plain loop against the
# trainer's step and landcover train, issue 43; not in the default list); the first five by default, in that
# order; one stage a call where a machine limits how long a command runs (10 minutes on a lent one).
# On a lent GPU machine with no internet (docs/guide/devices.md): run scripts/device-wheels.sh
# here first, carry .whl, and there:
#   python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
#   PYTHONPATH=$PWD:/tmp/site PYTHON=python3 bash scripts/gpu-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
STAGES=("$@")
if (( ${#STAGES[@]} == 0 )); then
    STAGES=(tests smoke scaling predict feed)
fi
for stage in "${STAGES[@]}"; do
    case "$stage" in
        tests|smoke|scaling|predict|feed|step) ;;
        *) echo "error: unknown stage '$stage' (tests, smoke, scaling, predict, feed, step)" >&2; exit 2 ;;
    esac
done
if [[ -z "${PYTHON:-}" ]]; then
    bash scripts/setup.sh --dev
    PYTHON=.venv/bin/python
fi
if ! "$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    echo "error: torch sees no CUDA GPU here; run scripts/gpu-check.sh on a GPU machine" >&2
    exit 1
fi
RESULTS_DIR=${GPU_CHECK_OUT:-benchmarks/results/gpu}
mkdir -p "$RESULTS_DIR"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export PYTHONUNBUFFERED=1
"$PYTHON" -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0))" | tee "$RESULTS_DIR/device.txt"

for stage in "${STAGES[@]}"; do
    echo "== $stage"
    start=$SECONDS
    case "$stage" in
    tests)
        # -m cuda selects them; one skipped for want of a GPU fails this check (the GPU is
        # there); test_feed skips its photometric cases on CUDA by design (another generator)
        "$PYTHON" -m pytest -m cuda -ra -q tests/parallel/test_cuda.py tests/feed/test_feed.py \
            tests/training/test_step_sync.py tests/training/test_graph_step.py tests/feed/test_loader.py \
            tests/feed/test_devicecopy.py 2>&1 | tee "$RESULTS_DIR/cuda-tests.txt"
        if grep -q "needs a CUDA GPU" "$RESULTS_DIR/cuda-tests.txt"; then
            echo "error: cuda tests were skipped on a GPU machine" >&2
            exit 1
        fi
        ;;
    smoke)  # landcover train + predict on CUDA (sample data, default config, 2 epochs)
        SAMPLE=$("$PYTHON" -m landcover data sample)
        "$PYTHON" -m landcover train --config configs/default.yaml --data "$SAMPLE" --out "$WORK/run" \
            --epochs 2 --samples-per-epoch 2048 --device cuda --set run.profile_steps=10 \
            2>&1 | tee "$RESULTS_DIR/train.log"
        "$PYTHON" -m landcover predict "$SAMPLE/sample_011_naip.tif" --checkpoint "$WORK/run/checkpoints/last.pt" \
            --out "$WORK/maps" --device cuda 2>&1 | tee "$RESULTS_DIR/predict.log"
        cp "$WORK/run/metrics.jsonl" "$RESULTS_DIR/train-metrics.jsonl"
        # 10 steps under torch's profiler: ms a step and the GPU kernels' share of them
        cp "$WORK/run/profile/rank0.txt" "$RESULTS_DIR/train-profile.txt"
        ;;
    scaling)  # 1-GPU training in fp32, bf16 and bf16 + torch.compile: samples/s and MFU
        "$PYTHON" benchmarks/scaling_bench.py --quick --gpu-only --out "$RESULTS_DIR" 2>&1 | tee "$RESULTS_DIR/scaling.txt"
        ;;
    predict)  # the default model on the GPU, with and without probabilities, COGs written
        # PREDICT_SHARED_JOBS=4,8 runs only those shared-GPU jobs (default 1,4,8,4c);
        # PREDICT_SHARED_TILES=4: each maps 4 copies of the tile (default 16)
        "$PYTHON" benchmarks/predict_bench.py --only gpu --out "$RESULTS_DIR" \
            --cache "$WORK/predict" ${PREDICT_SHARED_JOBS:+--shared-jobs "$PREDICT_SHARED_JOBS"} \
            ${PREDICT_SHARED_TILES:+--shared-tiles "$PREDICT_SHARED_TILES"} \
            2>&1 | tee "$RESULTS_DIR/predict.txt"
        ;;
    step)  # issue 43: the plain loop, the trainer's step and landcover train, side by side
        "$PYTHON" benchmarks/step_bench.py --cli --batch 16 64 --seconds 4 --cli-epochs 3 \
            --cli-samples 3072 --out "$RESULTS_DIR" 2>&1 | tee "$RESULTS_DIR/step.txt"
        ;;
    feed)  # the training feed's headroom against the GPU
        "$PYTHON" benchmarks/feed_bench.py --quick --out "$RESULTS_DIR" 2>&1 | tee "$RESULTS_DIR/feed.txt"
        ;;
    esac
    echo "== $stage: $(( SECONDS - start )) s" | tee -a "$RESULTS_DIR/stages.txt"
done
"$PYTHON" benchmarks/run.py --summary --out "$RESULTS_DIR" > /dev/null
echo "gpu-check: results in $RESULTS_DIR"
