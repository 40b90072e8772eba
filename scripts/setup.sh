#!/usr/bin/env bash
# Creates .venv (if missing) and installs PocketMCP with its test tools into it.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
"$PYTHON" - <<'PY'
import sys
if sys.version_info < (3, 11):
    sys.exit(f"PocketMCP needs Python 3.11 or newer; {sys.executable} is {sys.version.split()[0]}")
PY
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip >&2
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[dev]" >&2
# The browser tests (tests/web) drive Debian's Chromium through Playwright; Playwright never
# downloads a browser here. Installed as root with apt when missing; otherwise those tests
# skip with the reason (and fail under CI=true).
if [ -x /usr/lib/chromium/chromium-headless-shell ] || [ -x /usr/lib/chromium/chromium ] \
    || [ -n "${POCKETMCP_CHROMIUM:-}" ]; then
  :
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends chromium-headless-shell >/dev/null
else
  echo "setup: Chromium is not installed; tests/web will be skipped" \
       "(apt-get install -y --no-install-recommends chromium-headless-shell)" >&2
fi
