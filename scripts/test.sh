#!/usr/bin/env bash
# Sets up .venv with the dev extras, Azurite and Horovod, and runs the whole test suite.
# Usage: bash scripts/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --dev
bash scripts/install-azurite.sh
bash scripts/install-horovod.sh
# the Horovod tests fail (rather than skip) if Horovod is missing
export LANDCOVER_REQUIRE_HOROVOD=1
exec .venv/bin/python -m pytest "$@"
