#!/usr/bin/env bash
# Sets up .venv with the dev extras and runs the whole test suite.
# Usage: bash scripts/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --dev
bash scripts/install-azurite.sh
exec .venv/bin/python -m pytest "$@"
