"""The gitignore-style matcher (core/globs.py) on many paths: a path_glob over 50,000 paths
and the folder filter (PathFilter.wants_file, the default INCLUDE_GLOBS and the ignore list)
over 20,000, each against pathspec, the regular-expression reader it replaced (a dev
dependency), in the same run.

    .venv/bin/python bench/globs.py
    .venv/bin/python bench/globs.py --repeat 5

Results: bench/results/globs.json (seconds per pass, best of --repeat, and the ratio
to pathspec).
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable
from typing import Any

import pathspec
from common import add_result_args, machine, write_results

from pocketmcp.core.globs import Glob
from pocketmcp.core.paths import ALWAYS_IGNORED, PathFilter
from pocketmcp.pipeline.settings import INCLUDE

WORDS = ["notes", "docs", "src", "archive", "2024", "meeting", "draft", "a", "project-x",
         "Reading List", "node_modules", ".git", "img", "deep", "b"]
EXTS = [".md", ".txt", ".pdf", ".png", ".py", ".json", ".md~", ".swp", ".docx", ""]

PATH_GLOBS = ["notes/**/*.md", "*.md", "**/*.pdf", "docs/**", "notes/2024/meeting.md",
              "**/draft*", "a*b*c?d", "[nd]*/**/*.[mt]*"]


def _paths(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        depth = rng.randrange(1, 6)
        folders = [rng.choice(WORDS) for _ in range(depth - 1)]
        name = rng.choice(WORDS) + str(rng.randrange(1000)) + rng.choice(EXTS)
        out.append("/".join([*folders, name]))
    return out


def _best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    best, answer = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        answer = fn()
        best = min(best, time.perf_counter() - started)
    return round(best, 4), answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    add_result_args(parser, "globs")
    args = parser.parse_args()

    paths = _paths(50_000, args.seed)
    results: dict[str, Any] = {"path_glob": {}, "wants_file": {}}
    for pattern in PATH_GLOBS:
        glob = Glob(pattern)
        spec = pathspec.PathSpec.from_lines("gitignore", [pattern])
        ours, ours_hits = _best(lambda g=glob: [p for p in paths if g.match(p)], args.repeat)
        theirs, their_hits = _best(lambda s=spec: [p for p in paths if s.match_file(p)],
                                   args.repeat)
        assert ours_hits == their_hits, pattern
        results["path_glob"][pattern] = {"paths": len(paths), "matched": len(ours_hits),
                                         "globs_s": ours, "pathspec_s": theirs,
                                         "ratio": round(ours / theirs, 2)}
        print(f"path_glob {pattern!r}: {ours:.3f} s vs pathspec {theirs:.3f} s")

    include = SETTINGS_DEFAULT_INCLUDE
    files = paths[:20_000]
    folder = PathFilter(include)
    spec_in = pathspec.PathSpec.from_lines("gitignore", include)
    spec_out = pathspec.PathSpec.from_lines("gitignore", ALWAYS_IGNORED)
    ours, ours_hits = _best(lambda: [p for p in files if folder.wants_file(p)], args.repeat)
    theirs, their_hits = _best(
        lambda: [p for p in files if spec_in.match_file(p) and not spec_out.match_file(p)],
        args.repeat)
    assert ours_hits == their_hits
    results["wants_file"] = {"paths": len(files), "wanted": len(ours_hits), "globs_s": ours,
                             "pathspec_s": theirs, "ratio": round(ours / theirs, 2)}
    print(f"wants_file: {ours:.3f} s vs pathspec {theirs:.3f} s")
    results["machine"] = machine()
    print(write_results(args, results))


SETTINGS_DEFAULT_INCLUDE = list(INCLUDE)

if __name__ == "__main__":
    main()
