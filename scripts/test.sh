#!/usr/bin/env bash
# Sets up and runs the test suite (the same command CI runs): setup, ruff, mypy --strict and
# every test. `--fast` first: the tests with no lane mark only (no real model, processes,
# Postgres, browser or build; docs/development.md), in about a minute. Other arguments go to
# pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
lanes=()
if [ "${1:-}" = "--fast" ]; then
  shift
  lanes=(-m "not (model or process or pg or browser or build)")
fi
scripts/setup.sh
.venv/bin/ruff check pocketmcp tests bench scripts
.venv/bin/mypy
.venv/bin/python -m pytest ${lanes[@]+"${lanes[@]}"} "$@"
