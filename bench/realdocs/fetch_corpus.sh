#!/usr/bin/env bash
# Materialise the "realdocs" evaluation corpus: the Markdown documentation
# shipped in the source distribution of Hatch 1.18.2 (MIT licence), pinned by
# version and sha256.
#
# usage: fetch_corpus.sh DEST
#
# DEST ends up holding exactly docs/**/*.md from the sdist (82 files), with the
# same relative paths the qrels use, e.g. DEST/docs/config/build.md.
#
# The archive is fetched once with pip (the ordinary PyPI client) into a cache
# folder ($POCKETMCP_EVAL_CACHE, default ~/.cache/pocketmcp-evalset) and checked
# against the hard-coded sha256 before anything is extracted. Running the
# script again is a no-op when DEST already matches; a DEST that holds anything
# other than what this script writes is refused rather than overwritten.
set -euo pipefail

NAME=hatch
VERSION=1.18.2
SHA256=7f365f1a5b8f1a8162813daed9bf9fce83f15dc933fc99c6d04cbb942e64f4d0
ARCHIVE_NAME="$NAME-$VERSION.tar.gz"
EXPECTED_FILES=82

if [ $# -ne 1 ] || [ -z "$1" ]; then
    echo "usage: $0 DEST" >&2
    exit 2
fi
DEST=$1
CACHE=${POCKETMCP_EVAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pocketmcp-evalset}
ARCHIVE="$CACHE/$ARCHIVE_NAME"
PYTHON=${PYTHON:-python3}

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

# 1. The archive, from the cache or from the registry, always hash-checked.
mkdir -p "$CACHE"
if [ -f "$ARCHIVE" ] && [ "$(sha_of "$ARCHIVE")" != "$SHA256" ]; then
    echo "cached $ARCHIVE has the wrong sha256; fetching it again" >&2
    rm -f "$ARCHIVE"
fi
if [ ! -f "$ARCHIVE" ]; then
    dl=$(mktemp -d "$CACHE/download.XXXXXX")
    trap 'rm -rf "$dl"' EXIT
    printf '%s==%s --hash=sha256:%s\n' "$NAME" "$VERSION" "$SHA256" > "$dl/requirements.txt"
    "$PYTHON" -m pip download --quiet --no-deps --no-binary :all: --require-hashes \
        --no-cache-dir -r "$dl/requirements.txt" -d "$dl/out"
    [ -f "$dl/out/$ARCHIVE_NAME" ] || { echo "pip did not produce $ARCHIVE_NAME" >&2; exit 1; }
    mv "$dl/out/$ARCHIVE_NAME" "$ARCHIVE"
    rm -rf "$dl"
    trap - EXIT
fi
actual=$(sha_of "$ARCHIVE")
if [ "$actual" != "$SHA256" ]; then
    echo "sha256 mismatch for $ARCHIVE: expected $SHA256, got $actual" >&2
    exit 1
fi

# 2. Extract only docs/**/*.md into a staging folder beside DEST.
parent=$(dirname -- "$DEST")
mkdir -p "$parent"
stage=$(mktemp -d "$parent/.fetch_corpus.XXXXXX")
trap 'rm -rf "$stage"' EXIT
tar -xzf "$ARCHIVE" -C "$stage" --no-same-owner --wildcards "$NAME-$VERSION/docs/*.md"
new="$stage/$NAME-$VERSION"
count=$(find "$new/docs" -type f -name '*.md' | wc -l)
if [ "$count" -ne "$EXPECTED_FILES" ]; then
    echo "expected $EXPECTED_FILES Markdown files, extracted $count" >&2
    exit 1
fi
# Fixed modes, whatever the umask (file times come from the archive).
find "$new" -type d -exec chmod 755 {} +
find "$new" -type f -exec chmod 644 {} +

# 3. Put it in place, unless DEST already holds exactly this.
if [ -d "$DEST" ]; then
    if diff -r -q "$new" "$DEST" >/dev/null 2>&1; then
        echo "$DEST already holds $count Markdown files of $NAME $VERSION; nothing to do"
        exit 0
    fi
    other=$(find "$DEST" -mindepth 1 -maxdepth 1 ! -name docs | head -n 1)
    stray=$(find "$DEST" -mindepth 1 -type f ! -name '*.md' | head -n 1)
    if [ -n "$other" ] || [ -n "$stray" ]; then
        echo "refusing to replace $DEST: it holds files this script did not write (${other:-$stray})" >&2
        exit 1
    fi
    rm -rf "$DEST/docs"
else
    mkdir -p "$DEST"
fi
mv "$new/docs" "$DEST/docs"
echo "wrote $count Markdown files of $NAME $VERSION to $DEST"
