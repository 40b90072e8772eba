#!/usr/bin/env bash
# Materialise the "realdocs-starlette" evaluation corpus: the Markdown documentation of
# Starlette 0.47.3 (BSD-3-Clause), from its repository at the release commit.
#
# usage: fetch_corpus.sh DEST
#
# DEST ends up holding exactly docs/*.md of that commit (25 files), with the relative paths
# the qrels use, e.g. DEST/docs/middleware.md. The repository is cloned once with git (the
# ordinary client) into a cache folder ($POCKETMCP_EVAL_CACHE, default
# ~/.cache/pocketmcp-evalset); the files are checked against a hard-coded sha256 of their
# concatenation. A DEST that holds anything else is refused rather than overwritten.
set -euo pipefail

REPO=https://github.com/encode/starlette.git
COMMIT=cb8f84f5284dc301ca7a31eb732b9e140769dd48  # "Version 0.47.3"
SHA256=3c29f33e5ccb4382670b7b3313b642d7d3ca549df95c8659c98e9f1c1287096a
EXPECTED_FILES=25

if [ $# -ne 1 ] || [ -z "$1" ]; then
    echo "usage: $0 DEST" >&2
    exit 2
fi
DEST=$1
CACHE=${POCKETMCP_EVAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pocketmcp-evalset}
CLONE="$CACHE/starlette.git"

mkdir -p "$CACHE"
if [ ! -d "$CLONE" ]; then
    git clone --quiet --bare --filter=blob:none "$REPO" "$CLONE"
fi
git -C "$CLONE" cat-file -e "$COMMIT^{commit}" 2>/dev/null || git -C "$CLONE" fetch --quiet origin

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
git -C "$CLONE" archive "$COMMIT" docs | tar -x -C "$WORK" --wildcards 'docs/*.md'
found=$(find "$WORK/docs" -name '*.md' | wc -l)
if [ "$found" -ne "$EXPECTED_FILES" ]; then
    echo "expected $EXPECTED_FILES Markdown files, found $found" >&2
    exit 1
fi
if [ "$(cd "$WORK" && cat docs/*.md | sha256sum | cut -d' ' -f1)" != "$SHA256" ]; then
    echo "the files of $COMMIT do not have the expected sha256" >&2
    exit 1
fi

if [ -d "$DEST" ] && [ -n "$(ls -A "$DEST")" ]; then
    if diff -r "$WORK" "$DEST" >/dev/null; then
        echo "nothing to do: $DEST already holds the corpus"
        exit 0
    fi
    echo "$DEST holds other files; refusing to overwrite it" >&2
    exit 1
fi
mkdir -p "$DEST"
cp -r "$WORK/docs" "$DEST/"
echo "wrote $EXPECTED_FILES Markdown files of starlette 0.47.3 to $DEST"
