#!/usr/bin/env bash
# Creates .venv (if missing) and installs PocketMCP with its test tools into it (Chromium and
# the MCP Inspector too, when missing); `--app`: PocketMCP alone, as the demo needs it. Says
# what it does and how long each step took, on stderr (the first install takes a minute or
# two).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=dev
if [ "${1:-}" = "--app" ]; then
  mode=app
fi
PYTHON="${PYTHON:-python3}"
step_started=$SECONDS
step() { step_started=$SECONDS; echo "setup: $*..." >&2; }
done_step() { echo "setup:   done in $((SECONDS - step_started)) s" >&2; }
"$PYTHON" - <<'PY'
import sys
if sys.version_info < (3, 11):
    sys.exit(f"PocketMCP needs Python 3.11 or newer; {sys.executable} is {sys.version.split()[0]}")
PY
if [ ! -x .venv/bin/python ]; then
  step "creating .venv with $("$PYTHON" --version 2>&1)"
  "$PYTHON" -m venv .venv
  done_step
fi
# What the last complete install was made from (pyproject.toml and this script): when they
# are unchanged and pip finds nothing missing but the GUI OpenCV left out on purpose (below),
# pip is not run again (it would install that OpenCV again, to swap it back out).
stamp=.venv/.pocketmcp-installed
made_from=$(cat pyproject.toml scripts/setup.sh | .venv/bin/python -c \
    "import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())")
installed() {
  # A test install holds what the app needs; an app install lacks the test tools.
  [ -f "$stamp" ] || return 1
  case "$(cat "$stamp")" in
    "$made_from dev") ;;
    "$made_from app") [ "$mode" = app ] || return 1 ;;
    *) return 1 ;;
  esac
  # pip check's complaints, but rapidocr's about the GUI OpenCV, and cv2 from headless alone
  ! .venv/bin/python -m pip check --disable-pip-version-check 2>&1 \
      | grep -v -e "^No broken requirements found" \
                -e "^rapidocr-onnxruntime .* requires opencv-python, which is not installed" \
      | grep -q . \
    && ! .venv/bin/python -m pip show --quiet opencv-python >/dev/null 2>&1
}
# A test install stays one: the demo's setup over it installs the test tools' packages too
# (pip would otherwise leave them behind a newer PocketMCP, at odds with it).
installs=$mode
if [ "$mode" = app ] && [ -f "$stamp" ]; then
  case "$(cat "$stamp")" in
    *" app") ;;
    *) installs=dev ;;
  esac
fi
if installed; then
  echo "setup: PocketMCP and its dependencies are installed as pyproject.toml says" \
       "(pip not run; delete $stamp to run it)" >&2
else
  rm -f "$stamp"
  step "updating pip in .venv"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip >&2
  done_step
  step "installing PocketMCP and its dependencies (the model comes with them) into .venv"
  if [ "$installs" = app ]; then
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -e . >&2
  else
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[dev]" >&2
  fi
  done_step
  # The OCR extra's rapidocr asks for OpenCV's GUI build (it needs libGL); only the headless
  # one, which the extra names too, may provide cv2: both write the same files.
  if .venv/bin/python -m pip show --quiet opencv-python >/dev/null 2>&1; then
    step "keeping only the headless OpenCV (for OCR)"
    cv=$(.venv/bin/python -c \
        "import importlib.metadata as m; print(m.version('opencv-python-headless'))")
    .venv/bin/python -m pip uninstall --quiet --disable-pip-version-check -y opencv-python \
        opencv-python-headless >&2
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps \
        "opencv-python-headless==$cv" >&2
    done_step
  fi
  echo "$made_from $installs" > "$stamp"
fi
# The package is installed editable, so pip compiles none of its modules: compile them now,
# or the first server start pays for it (a few tenths of a second) before its first answer.
step "compiling PocketMCP's modules"
.venv/bin/python -m compileall -q pocketmcp >&2
done_step
if [ "$mode" = app ]; then
  echo "setup: ready in $SECONDS s ($(.venv/bin/pocketmcp --version))" >&2
  exit 0
fi
# The browser tests (tests/web) drive Debian's Chromium through Playwright; Playwright never
# downloads a browser here. Installed as root with apt when missing; otherwise those tests
# skip with the reason (and fail under CI=true).
if [ -x /usr/lib/chromium/chromium-headless-shell ] || [ -x /usr/lib/chromium/chromium ] \
    || [ -n "${POCKETMCP_CHROMIUM:-}" ]; then
  :
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  step "installing chromium-headless-shell with apt (for the browser tests)"
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends chromium-headless-shell >/dev/null
  done_step
else
  echo "setup: Chromium is not installed; tests/web will be skipped" \
       "(apt-get install -y --no-install-recommends chromium-headless-shell)" >&2
fi
# The MCP Inspector interop tests (tests/mcp/test_inspector.py) run the official inspector,
# a node program: node and npm installed as root with apt when missing, the inspector from
# npm into .cache/inspector (scripts/inspector.sh uses the same). Without them those tests
# are skipped with the reason (and fail under CI=true).
INSPECTOR_VERSION=2.12.0
inspector=.cache/inspector/node_modules/.bin/mcp-inspector
if [ ! -x "$inspector" ]; then
  if ! command -v npm >/dev/null 2>&1 && [ "$(id -u)" = 0 ] \
      && command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    step "installing node and npm with apt (for the MCP Inspector tests)"
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
    done_step
  fi
  if command -v npm >/dev/null 2>&1; then
    step "installing the MCP Inspector $INSPECTOR_VERSION from npm into .cache/inspector"
    mkdir -p .cache/inspector
    npm install --prefix .cache/inspector --save-exact --no-fund --no-audit \
      --loglevel=error "@modelcontextprotocol/inspector@$INSPECTOR_VERSION" >&2
    done_step
  else
    echo "setup: npm is not installed; tests/mcp/test_inspector.py will be skipped" \
         "(apt-get install -y --no-install-recommends nodejs npm)" >&2
  fi
fi
echo "setup: ready in $SECONDS s ($(.venv/bin/pocketmcp --version))" >&2
