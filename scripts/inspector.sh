#!/usr/bin/env bash
# Drives the server with the official MCP Inspector in CLI mode: tools/list, a search, and
# resources/read of the first match. Installs the inspector (npm) into .cache/inspector once.
# Usage: scripts/inspector.sh [FOLDER]   (default: examples/kb)
set -euo pipefail
cd "$(dirname "$0")/.."
INSPECTOR_VERSION="${INSPECTOR_VERSION:-2.12.0}"
prefix=.cache/inspector
bin="$prefix/node_modules/.bin/mcp-inspector"
if [ ! -x "$bin" ]; then
  mkdir -p "$prefix"
  npm install --prefix "$prefix" --no-fund --no-audit --loglevel=error \
    "@modelcontextprotocol/inspector@$INSPECTOR_VERSION" >&2
fi
folder="$(cd "${1:-examples/kb}" && pwd)"
db="$(mktemp -d)/index.db"
server=(-e "WATCH_DIR=$folder" -e "SQLITE_PATH=$db" -e "HOME=$HOME" "$PWD/.venv/bin/python" -m pocketmcp)
echo "== tools/list" >&2
"$bin" --cli "${server[@]}" --method tools/list | .venv/bin/python -c \
  'import json,sys; print("\n".join(t["name"] for t in json.load(sys.stdin)["tools"]))'
echo "== tools/call search" >&2
result="$("$bin" --cli "${server[@]}" --method tools/call --tool-name search \
  --tool-arg "query=how do I keep a sourdough starter alive" --tool-arg top_k=3)"
echo "$result" | .venv/bin/python -c \
  'import json,sys; [print(m["score"], m["path"], m["resource"]) for m in json.load(sys.stdin)["structuredContent"]["matches"]]'
uri="$(echo "$result" | .venv/bin/python -c \
  'import json,sys; print(json.load(sys.stdin)["structuredContent"]["matches"][0]["resource"])')"
echo "== resources/read $uri" >&2
"$bin" --cli "${server[@]}" --method resources/read --uri "$uri" | .venv/bin/python -c \
  'import json,sys; print(json.loads(json.load(sys.stdin)["contents"][0]["text"])["text"][:200])'
