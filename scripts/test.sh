#!/usr/bin/env bash
# Sets up .venv with the dev extras, Azurite, Horovod and Chromium, and runs the test suite in one
# pytest process per core (pytest-xdist; LANDCOVER_TEST_PROCESSES=N to choose, 0 for one
# process). The outcome checks, which train a shipped config to the end, are their own run:
# bash scripts/test.sh -m outcome (docs/tests.md).
# Usage: bash scripts/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --dev
bash scripts/install-azurite.sh
bash scripts/install-horovod.sh
bash scripts/install-chromium.sh
# the Horovod tests fail (rather than skip) if Horovod is missing
export LANDCOVER_REQUIRE_HOROVOD=1
# and the viewer's browser tests if Chromium is (scripts/install-chromium.sh installs it)
export LANDCOVER_REQUIRE_CHROMIUM=1
# OpenMP threads that wait by spinning take the cores from the other test processes: with two
# processes on two cores an in-process training ran 2x slower than alone; waiting passively,
# 1.1x (docs/tests.md)
if [[ "${LANDCOVER_TEST_PROCESSES:-auto}" != 0 ]]; then
  export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
fi
# a test file stays on one process (--dist loadfile): its module fixtures are built once; the
# files are dealt in the order tests/conftest.py puts them, the slowest first (docs/tests.md)
exec .venv/bin/python -m pytest -n "${LANDCOVER_TEST_PROCESSES:-auto}" --dist loadfile \
    --no-loadscope-reorder "$@"
