#!/usr/bin/env bash
# The wheels a lent GPU machine needs to run scripts/gpu-check.sh, downloaded here into .whl/
# (git-ignored). That machine has Python 3.12 with PyTorch, torchvision, timm, numpy, scipy,
# typer, rich, fsspec, matplotlib and pytest, but no internet: the packages below, which
# landcover's train / predict / region-job code, tests/parallel/test_cuda.py and the GPU
# benchmark parts import and its image lacks, travel with the working tree (at most 64 MiB in
# all), at this environment's versions. On that machine (docs/guide/devices.md):
#   python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
#   PYTHONPATH=$PWD:/tmp/site PYTHON=python3 bash scripts/gpu-check.sh
# Usage: bash scripts/device-wheels.sh   (after bash scripts/setup.sh --dev)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
DEST=.whl
PACKAGES=(
    segmentation-models-pytorch rasterio affine pydantic pydantic-core annotated-types
    typing-inspection tenacity rio-cogeo morecantile pyproj
)
# pystac is a meta-package: its core and every extension package (a few kB each)
mapfile -t STAC < <("$PYTHON" -c "
import importlib.metadata as md
print('\n'.join(sorted({d.metadata['Name'] for d in md.distributions()
                        if d.metadata['Name'].lower().startswith('pystac')})))")
pins=()
for name in "${PACKAGES[@]}" "${STAC[@]}"; do
    pins+=("$name==$("$PYTHON" -c "import importlib.metadata as md, sys; print(md.version(sys.argv[1]))" "$name")")
done
rm -rf "$DEST"
mkdir -p "$DEST"
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64; do
    platforms+=(--platform "$p")
done
"$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp "${platforms[@]}" -d "$DEST" "${pins[@]}"
size=$(du -sm "$DEST" | cut -f1)
echo "$(ls "$DEST" | wc -l) wheels, $size MiB in $DEST"
if (( size > 56 )); then  # the working tree travels too (about 3 MiB of tracked files)
    echo "error: $DEST is $size MiB; with the working tree it would pass the 64 MiB a call carries" >&2
    exit 1
fi
