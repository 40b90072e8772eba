#!/usr/bin/env bash
# Sets up and runs the test suite (the same command CI runs): setup, ruff, mypy --strict and
# every test. `--fast` first: the tests with no lane mark only (no real model, processes,
# Postgres, browser or build; docs/development.md), in about a minute. Other arguments go to
# pytest, which then runs once with them.
set -euo pipefail
cd "$(dirname "$0")/.."
fast=0
if [ "${1:-}" = "--fast" ]; then
  fast=1
  shift
fi
unmarked="not (model or process or pg or browser or build)"
scripts/setup.sh
.venv/bin/ruff check pocketmcp tests bench scripts
.venv/bin/mypy
if [ "$fast" = 1 ]; then
  .venv/bin/python -m pytest -m "$unmarked" "$@"
elif [ $# -gt 0 ]; then
  .venv/bin/python -m pytest "$@"
else
  # The unmarked tests in one process, where the one-second rule times them alone; then the
  # marked ones (processes, the model, Postgres, the browser, builds: mostly waiting on
  # something) in two workers side by side.
  .venv/bin/python -m pytest -m "$unmarked"
  .venv/bin/python -m pytest -m "not ($unmarked)" -n 2
fi
