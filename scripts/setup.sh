#!/usr/bin/env bash
# Creates .venv with landcover and its dependencies (torch, torchvision, smp, rasterio, ...).
# Re-running is instant when pyproject.toml has not changed; pip's cache (~/.cache/pip) makes
# a reinstall cheap. Usage: bash scripts/setup.sh [--dev]
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
# the view extra (landcover view's map tiles) by default; the dev extras hold it too
extras="[view]" suffix=""
if [[ "${1:-}" == "--dev" ]]; then
    extras="[dev]" suffix="-dev"
fi
stamp=".venv/.landcover-install-$(sha256sum pyproject.toml | cut -c1-16)${suffix}"
if [[ -f "$stamp" ]]; then
    exit 0
fi
if [[ ! -x .venv/bin/python ]]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
echo "installing landcover${extras} and its dependencies into .venv (torch is a large download the first time)"
.venv/bin/python -m pip install --quiet -e ".${extras}"
rm -f .venv/.landcover-install-*
touch "$stamp"
