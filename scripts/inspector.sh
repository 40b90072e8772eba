#!/usr/bin/env bash
# Drives the server with the official MCP Inspector in CLI mode: tools/list, a search, and
# resources/read of the first match. Installs the inspector (npm) into .cache/inspector once.
# Usage: scripts/inspector.sh [--http] [FOLDER]   (default: examples/kb)
#   default: the inspector spawns the server on stdio;
#   --http:  one server runs over HTTP (127.0.0.1, a free port, its own token) and the
#            inspector calls it at /mcp (Streamable HTTP) and /sse (HTTP+SSE).
set -euo pipefail
cd "$(dirname "$0")/.."
INSPECTOR_VERSION="${INSPECTOR_VERSION:-2.12.0}"
prefix=.cache/inspector
bin="$prefix/node_modules/.bin/mcp-inspector"
if [ ! -x "$bin" ]; then
  mkdir -p "$prefix"
  npm install --prefix "$prefix" --save-exact --no-fund --no-audit --loglevel=error \
    "@modelcontextprotocol/inspector@$INSPECTOR_VERSION" >&2
fi
http=0
if [ "${1:-}" = "--http" ]; then http=1; shift; fi
folder="$(cd "${1:-examples/kb}" && pwd)"
work="$(mktemp -d)"
db="$work/index.db"
export HOME_FOR_INSPECTOR="$work/home"  # the inspector keeps state under $HOME/.mcp-inspector
mkdir -p "$HOME_FOR_INSPECTOR"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill -TERM "$server_pid" 2>/dev/null || true; wait "$server_pid" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

if [ "$http" = 1 ]; then
  WATCH_DIR="$folder" SQLITE_PATH="$db" .venv/bin/python -m pocketmcp serve --transport http \
    --port 0 2>"$work/server.err" &
  server_pid=$!
  for _ in $(seq 600); do  # up to 60 s: the discovery file names the URL, /health/ready says 200
    if [ -f "$db.server.json" ]; then
      url="$(.venv/bin/python -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$db.server.json")"
      if curl -fsS --noproxy "*" "$url/health/ready" >/dev/null 2>&1; then break; fi
    fi
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.err" >&2; exit 1; }
    sleep 0.1
  done
  auth="Authorization: Bearer $(cat "$db.token")"
  inspect() { HOME="$HOME_FOR_INSPECTOR" "$bin" --cli "$url/mcp" --transport http \
    --header "$auth" --stored-auth-only "$@"; }
  echo "== tools/list over /sse" >&2
  HOME="$HOME_FOR_INSPECTOR" "$bin" --cli "$url/sse" --transport sse --header "$auth" \
    --stored-auth-only --method tools/list | .venv/bin/python -c \
    'import json,sys; print(len(json.load(sys.stdin)["tools"]), "tools")'
else
  server=(-e "WATCH_DIR=$folder" -e "SQLITE_PATH=$db" -e "HOME=$HOME" "$PWD/.venv/bin/python" -m pocketmcp)
  inspect() { HOME="$HOME_FOR_INSPECTOR" "$bin" --cli "${server[@]}" "$@"; }
fi

echo "== tools/list" >&2
inspect --method tools/list | .venv/bin/python -c \
  'import json,sys; print("\n".join(t["name"] for t in json.load(sys.stdin)["tools"]))'
echo "== tools/call search" >&2
result="$(inspect --method tools/call --tool-name search \
  --tool-arg "query=how do I keep a sourdough starter alive" --tool-arg top_k=3)"
echo "$result" | .venv/bin/python -c \
  'import json,sys; [print(m["score"], m["path"], m["resource"]) for m in json.load(sys.stdin)["structuredContent"]["matches"]]'
uri="$(echo "$result" | .venv/bin/python -c \
  'import json,sys; print(json.load(sys.stdin)["structuredContent"]["matches"][0]["resource"])')"
echo "== resources/read $uri" >&2
inspect --method resources/read --uri "$uri" | .venv/bin/python -c \
  'import json,sys; print(json.loads(json.load(sys.stdin)["contents"][0]["text"])["text"][:200])'
