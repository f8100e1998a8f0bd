#!/usr/bin/env bash
# Builds Horovod 0.28.1 against the torch in .venv and installs it there.
#
# Horovod's last release compiles with C++14; torch 2.15's headers need C++20, so the sdist is
# patched to CMAKE_CXX_STANDARD 20 and built with Gloo (CPU collectives), without MPI,
# TensorFlow or MXNet unless asked. The built wheel is kept in a cache keyed by the Horovod,
# torch and Python versions, so only the first install pays for the build (2 to 15 minutes on 2 cores).
#
# Usage: bash scripts/install-horovod.sh
# Environment:
#   LANDCOVER_PYTHON     the Python whose torch Horovod is built against (default .venv/bin/python)
#   HOROVOD_WHEEL_CACHE  folder for built wheels (default ~/.cache/landcover/wheels)
#   HOROVOD_WITH_MPI=1   build the MPI controller too (needs an MPI install, e.g. OpenMPI)
#   HOROVOD_GPU_OPERATIONS=NCCL  NCCL collectives on GPU machines (needs NCCL and a CUDA toolkit)
#   CUDA_HOME            CUDA toolkit root (default: the one nvcc on PATH belongs to)
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION="${HOROVOD_VERSION:-0.28.1}"
PY="${LANDCOVER_PYTHON:-.venv/bin/python}"
if ! "$PY" -c "import torch" 2>/dev/null; then
    echo "error: no torch in $PY; run: bash scripts/setup.sh (or set LANDCOVER_PYTHON)" >&2
    exit 1
fi
if "$PY" -c "import horovod.torch, horovod; assert horovod.__version__ == '$VERSION'" 2>/dev/null; then
    exit 0
fi
for tool in cmake g++; do
    if ! command -v "$tool" >/dev/null; then
        echo "error: building Horovod needs $tool (e.g. apt-get install cmake g++)" >&2
        exit 1
    fi
done

torch_version=$("$PY" -c "import torch; print(torch.__version__)")
py_tag=$("$PY" -c "import sys; print(f'cp{sys.version_info.major}{sys.version_info.minor}')")
CACHE="${HOROVOD_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/landcover/wheels}"
key="horovod-$VERSION-torch-${torch_version//+/_}-$py_tag${HOROVOD_WITH_MPI:+-mpi}${HOROVOD_GPU_OPERATIONS:+-${HOROVOD_GPU_OPERATIONS,,}}"
slot="$CACHE/$key"
wheel=$(ls "$slot"/horovod-*.whl 2>/dev/null | head -n 1 || true)

if [[ -z "$wheel" ]]; then
    echo "building horovod $VERSION against torch $torch_version (a few minutes on 2 cores;" \
        "the wheel is cached in $slot)" >&2
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    "$PY" -m pip download --quiet --no-deps --no-binary :all: -d "$work" "horovod==$VERSION"
    tar -xzf "$work"/horovod-"$VERSION".tar.gz -C "$work"
    src="$work/horovod-$VERSION"
    # torch >= 2.1 needs C++17 and torch 2.15's headers need C++20
    sed -i -E 's/(CMAKE_CXX_STANDARD) 1[147]/\1 20/' "$src/CMakeLists.txt" "$src/horovod/torch/CMakeLists.txt"
    grep -q "CMAKE_CXX_STANDARD 20" "$src/CMakeLists.txt"
    # the PyPI torch is a CUDA build, so Horovod's CMake looks for a CUDA toolkit
    # (nvcc may be a wrapper script, so ask nvcc itself where its toolkit lies)
    if [[ -z "${CUDA_HOME:-}" ]] && command -v nvcc >/dev/null; then
        top=$(nvcc -x cu --dryrun -E /dev/null 2>&1 | sed -n 's/^#\$ TOP=//p' | head -n 1)
        [[ -n "$top" ]] && CUDA_HOME=$(readlink -f "$top")
    fi
    if [[ -z "${CUDA_HOME:-}" && -f /usr/local/cuda/include/cuda_runtime.h ]]; then
        CUDA_HOME=/usr/local/cuda
    fi
    if [[ -n "${CUDA_HOME:-}" ]]; then
        # CMake derives the toolkit from the compiler's folder: point it at the real nvcc
        export CUDA_HOME CUDAToolkit_ROOT="$CUDA_HOME" CUDACXX="$CUDA_HOME/bin/nvcc"
        export PATH="$CUDA_HOME/bin:$PATH"
        echo "using the CUDA toolkit in $CUDA_HOME" >&2
    fi
    # the build imports torch and needs setuptools/wheel in the venv itself
    "$PY" -m pip install --quiet setuptools wheel
    export CMAKE_POLICY_VERSION_MINIMUM=3.5 \
        HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_GLOO=1 \
        HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 \
        HOROVOD_CPU_OPERATIONS="${HOROVOD_CPU_OPERATIONS:-gloo}" \
        MAKEFLAGS="-j$(nproc)"
    if [[ -z "${HOROVOD_WITH_MPI:-}" ]]; then
        export HOROVOD_WITHOUT_MPI=1
    fi
    "$PY" -m pip wheel --no-build-isolation --no-deps -w "$work/dist" "$src"
    mkdir -p "$slot"
    built=$(ls "$work"/dist/horovod-*.whl)
    cp "$built" "$slot/.partial"
    mv "$slot/.partial" "$slot/$(basename "$built")"
    wheel="$slot/$(basename "$built")"
fi

echo "installing $(basename "$wheel")" >&2
"$PY" -m pip install --quiet "$wheel"
"$PY" -c "import horovod.torch as hvd; assert hvd.gloo_built(), 'horovod was built without Gloo'"
