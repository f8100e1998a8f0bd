#!/usr/bin/env bash
# Installs Azurite (Microsoft's Azure Storage emulator) into .tools/azurite for the tests.
# Idempotent: returns at once when the pinned version is already there.
# Needs Node.js 18+ and npm. Usage: bash scripts/install-azurite.sh
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION="${AZURITE_VERSION:-3.35.0}"
PREFIX=".tools/azurite"
BIN="$PREFIX/node_modules/.bin/azurite-blob"
MANIFEST="$PREFIX/node_modules/azurite/package.json"

installed_version() {
    node -p "require('./$MANIFEST').version" 2>/dev/null || true
}

if [[ -x "$BIN" ]] && command -v node >/dev/null && [[ "$(installed_version)" == "$VERSION" ]]; then
    exit 0
fi
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "error: Azurite needs Node.js 18+ and npm (e.g. apt-get install nodejs npm);" \
        "then run: bash scripts/install-azurite.sh" >&2
    exit 1
fi
echo "installing azurite $VERSION into $PREFIX" >&2
mkdir -p "$PREFIX"
npm install --prefix "$PREFIX" --no-audit --no-fund --loglevel=error --save-exact \
    "azurite@$VERSION" >&2
"$BIN" --version >/dev/null
