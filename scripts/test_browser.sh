#!/usr/bin/env bash
# `make test-browser`: JupyterLab + headless Debian Chromium driven by playwright
# (tests/browser). Installs Debian's chromium when missing (never `playwright install`).
# Screenshots: build/browser/.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
CHROMIUM=${PSENS_CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$CHROMIUM" ]; then
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
        chromium chromium-driver fonts-dejavu-core
fi
exec "$PY" -m pytest -q -m browser --timeout=600 tests/browser "$@"
