#!/usr/bin/env bash
# Sets up and runs the test suite (the same command CI runs).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
.venv/bin/ruff check pocketmcp tests bench scripts
.venv/bin/mypy
.venv/bin/python -m pytest "$@"
