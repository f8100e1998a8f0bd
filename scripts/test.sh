#!/usr/bin/env bash
# Sets up .venv with the dev extras, Azurite and Horovod, and runs the test suite in one
# pytest process per core (pytest-xdist; LANDCOVER_TEST_PROCESSES=N to choose, 0 for one
# process). The outcome checks, which train a shipped config to the end, are their own run:
# bash scripts/test.sh -m outcome (docs/tests.md).
# Usage: bash scripts/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --dev
bash scripts/install-azurite.sh
bash scripts/install-horovod.sh
# the Horovod tests fail (rather than skip) if Horovod is missing
export LANDCOVER_REQUIRE_HOROVOD=1
# a test file stays on one process (--dist loadfile): its module fixtures are built once
exec .venv/bin/python -m pytest -n "${LANDCOVER_TEST_PROCESSES:-auto}" --dist loadfile "$@"
