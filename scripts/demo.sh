#!/usr/bin/env bash
# Sets up, indexes the sample notes (Markdown, text, HTML) with the built-in model, and runs
# three searches, saying what it does and how long each step took.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "demo: setting up .venv (scripts/setup.sh --app; the first time takes a minute or two)" >&2
scripts/setup.sh --app
# The sample notes' index is kept inside the clone (SQLITE_PATH, when set, names another),
# not among your folders' indexes in the user data folder: a `pocketmcp search` from any
# directory then finds your own folder's index when it is the only one you have indexed.
folder="${WATCH_DIR:-examples/kb}"
export SQLITE_PATH="${SQLITE_PATH:-$PWD/.venv/demo-index/index.db}"
echo "demo: indexing $folder (pocketmcp index $folder)" >&2
started=$SECONDS
.venv/bin/pocketmcp index "$folder" --progress on
echo "demo: indexed in $((SECONDS - started)) s" >&2
for query in "how do I keep a sourdough starter alive" "why are my pods unreachable" \
             "my bike tyre keeps going flat"; do
  echo
  echo "search: $query"
  started=$SECONDS
  .venv/bin/pocketmcp search "$query" "$folder" -k 3
  echo "demo: searched in $((SECONDS - started)) s (loads the model each time; an HTTP" \
       "server of the index answers at once, see README)" >&2
done
