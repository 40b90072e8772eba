#!/usr/bin/env bash
# Builds the wheel, installs it with its dependencies into a fresh venv (pip's cache keeps a
# second run quick), and runs `pocketmcp --version`, `index` and `search` on examples/kb
# there, offline. About 2 minutes on the 2-core machine the first time (the dependencies
# are ~400 MB unpacked). tests/e2e/test_wheel.py checks the same wheel in seconds, with this
# checkout's dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
started=$SECONDS
echo "check_wheel: building the wheel..." >&2
"$PYTHON" -m pip wheel --no-deps -q -w "$work/dist" .
wheel="$(ls "$work"/dist/pocketmcp-*.whl)"
echo "check_wheel:   $(basename "$wheel") in $((SECONDS - started)) s" >&2
step=$SECONDS
echo "check_wheel: installing it with its dependencies into a fresh venv..." >&2
"$PYTHON" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --disable-pip-version-check "$wheel"
echo "check_wheel:   installed in $((SECONDS - step)) s" >&2
step=$SECONDS
export WATCH_DIR="$PWD/examples/kb" SQLITE_PATH="$work/index.db" HOME="$work"
export HF_HUB_OFFLINE=1 HTTPS_PROXY=http://127.0.0.1:9 HTTP_PROXY=http://127.0.0.1:9
cd "$work"
"$work/venv/bin/pocketmcp" --version
"$work/venv/bin/pocketmcp" index --progress off
"$work/venv/bin/pocketmcp" search "my bike tyre keeps going flat" -k 2
echo "check_wheel: ran offline in $((SECONDS - step)) s; all done in $SECONDS s" >&2
