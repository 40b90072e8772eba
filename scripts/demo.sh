#!/usr/bin/env bash
# Sets up, indexes the sample notes (Markdown, text, HTML) with the built-in model, and runs
# three searches.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export WATCH_DIR="${WATCH_DIR:-examples/kb}" SQLITE_PATH="${SQLITE_PATH:-data/demo.db}"
.venv/bin/pocketmcp index --progress on
for query in "how do I keep a sourdough starter alive" "why are my pods unreachable" \
             "my bike tyre keeps going flat"; do
  echo
  echo "search: $query"
  .venv/bin/pocketmcp search "$query" -k 3
done
