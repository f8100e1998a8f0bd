#!/usr/bin/env bash
# Installs Chromium from the system's packages (Debian's chromium) for the viewer's tests
# (tests/viewer: landcover view's page in a real headless browser, driven by Playwright).
# Idempotent: returns at once when /usr/bin/chromium (or CHROMIUM) is there. Playwright's
# own browser download (`playwright install`) is not used: it fetches from a CDN.
# Needs root or sudo and apt-get. Usage: bash scripts/install-chromium.sh
set -euo pipefail

CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
if [[ -x "$CHROMIUM" ]]; then
    exit 0
fi
if ! command -v apt-get >/dev/null; then
    echo "error: the viewer's tests need Chromium at $CHROMIUM (no apt-get here: install" \
        "chromium with the system's package manager, or set CHROMIUM to its path)" >&2
    exit 1
fi
sudo=""
if [[ "$(id -u)" != 0 ]]; then
    sudo="sudo"
fi
echo "installing chromium (apt-get) for the viewer's tests" >&2
$sudo apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >&2
"$CHROMIUM" --version >/dev/null
