"""Token counts for chunking: the tokenizer's whole pipeline against the counter that finds
the words itself and measures each distinct word once (pocketmcp/core/token_count.py).

The texts are the pieces chunking measures: generated notes (SciFact abstracts, three to five
paragraphs each, as bench/keywords_first.py writes them) cut every 880 characters into
pieces of 1,000. Both count every piece in one thread (TOKENIZERS_PARALLELISM=false, so the
tokenizer's CPU is the thread's), the counter first with nothing remembered (cold) and then
again (warm), alternating `--repeats` times; the counts must be the same.

    .venv/bin/python bench/token_count.py                 # 2,000 notes

Results: bench/results/token_count.json.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

os.environ["TOKENIZERS_PARALLELISM"] = "false"  # before the tokenizer is loaded

from common import add_result_args, load_1min, write_results
from keywords_first import write_notes

from pocketmcp.core.chunking import _counting_copy
from pocketmcp.core.token_count import FastCounter
from pocketmcp.embed.models import bundled_tokenizer

T = TypeVar("T")


def pieces(n: int) -> list[str]:
    with tempfile.TemporaryDirectory(prefix="pocketmcp-tokens-") as tmp:
        write_notes(Path(tmp), n)
        texts = [p.read_text(encoding="utf-8") for p in sorted(Path(tmp).rglob("*.md"))]
    return [t[i:i + 1000] for t in texts for i in range(0, len(t), 880)]


def cpu(fn: Callable[[], T]) -> tuple[float, T]:
    """`fn()` and the CPU seconds this thread spent on it."""
    started = time.thread_time()
    out = fn()
    return time.thread_time() - started, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    add_result_args(parser, "token_count")
    args = parser.parse_args()
    texts = pieces(args.notes)
    tokenizer = _counting_copy(bundled_tokenizer())
    runs: dict[str, list[float]] = {"tokenizer": [], "counter_cold": [], "counter_warm": []}
    load_before = load_1min()
    fallbacks = 0
    for _ in range(args.repeats):
        took, exact = cpu(lambda: [len(e.ids) for e in tokenizer.encode_batch(
            texts, add_special_tokens=True)])
        runs["tokenizer"].append(round(took, 3))
        counter = FastCounter.of(tokenizer)
        assert counter is not None
        for name in ("counter_cold", "counter_warm"):
            took, counted = cpu(lambda: counter.counts(texts))  # noqa: B023
            runs[name].append(round(took, 3))
            if counted != exact:
                sys.exit("the counter's counts differ from the tokenizer's")
        fallbacks = counter.fallbacks
    best = {name: min(v) for name, v in runs.items()}
    out = {"notes": args.notes, "pieces": len(texts),
           "characters": sum(map(len, texts)), "ascii_pieces": sum(t.isascii() for t in texts),
           "counted_by_the_tokenizer": fallbacks // 2, "cpu_s": runs,
           "tokenizer_vs_counter_cold": round(best["tokenizer"] / best["counter_cold"], 2),
           "tokenizer_vs_counter_warm": round(best["tokenizer"] / best["counter_warm"], 2),
           "load_1min_before": load_before, "load_1min_after": load_1min()}
    print(out, file=sys.stderr)
    write_results(args, out)


if __name__ == "__main__":
    main()
