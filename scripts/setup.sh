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
