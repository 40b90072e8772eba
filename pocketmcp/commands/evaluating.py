"""`pocketmcp eval DATASET_DIR`: index a BEIR-format data set's corpus, then measure retrieval
quality through the search tool's code path."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import anyio
import msgspec

from pocketmcp.commands.choosing import no_index
from pocketmcp.commands.progress import until_fed
from pocketmcp.config import Config
from pocketmcp.errors import NotReady, PocketError, TooFewQuestions
from pocketmcp.ops import evaluate, selfcheck
from pocketmcp.plans import READING, Plan
from pocketmcp.runtime import open_runtime
from pocketmcp.search import tuning
from pocketmcp.search.run import MODES, Mode, Params
from pocketmcp.store.api import Place


async def run(config: Config, args: argparse.Namespace) -> int:
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        raise PocketError(f"--modes {args.modes!r} is not valid: it accepts "
                          + ", ".join(MODES))
    try:
        params = msgspec.convert(json.loads(args.params), Params) if args.params else Params()
    except (ValueError, msgspec.ValidationError) as exc:
        raise PocketError(f"--params is not valid: {exc}") from None
    dataset_dir = Path(args.dataset)
    folder = Path(args.corpus) if args.corpus else None
    if folder is not None and not folder.is_dir():
        raise PocketError(f"--corpus {folder} is not a folder")
    dataset = evaluate.load_dataset(dataset_dir, args.split, corpus=folder is None)
    name = evaluate.doc_of if folder is None else str
    with tempfile.TemporaryDirectory(prefix="pocketmcp-eval-") as tmp:
        # A throwaway index beside the settings' (a file in tmp, or a schema of its own)
        place = config.main_place().throwaway(Path(tmp), Path(args.index) if args.index
                                              else None)
        if folder is None:  # kept beside a kept index; else gone with the temporary folder
            corpus = place.beside("corpus") if args.index else Path(tmp) / "corpus"
            files = await anyio.to_thread.run_sync(evaluate.write_corpus, corpus, dataset_dir)
        else:
            corpus = folder
            files = sum(1 for p in folder.rglob("*") if p.is_file())
        config = config.fed_from(corpus)
        try:
            built, counts, metrics = await _index_and_measure(config, place, dataset, modes,
                                                              params, name)
        finally:
            if not args.index:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(place.drop)
    report = evaluate.report(dataset_dir, files, dataset, counts["chunks"], built, params,
                             metrics)
    print(json.dumps(report, indent=2) if args.json else evaluate.table(report))  # noqa: T201
    return 0


async def _index_and_measure(config: Config, place: Place, dataset: evaluate.Dataset,
                             modes: list[str], params: Params, name: Callable[[str], str]
                             ) -> tuple[dict[str, Any], dict[str, int], Any]:
    """Index the corpus folder (WATCH_DIR), then measure: (how it was built, the
    index's counts, the metrics per mode)."""
    started = time.perf_counter()
    plan = Plan(writer="must", feed="scan", requests=False)
    async with open_runtime(config, plan, place=place) as runtime:
        await until_fed(runtime, config, "bar" if sys.stderr.isatty() else None)
        await runtime.started()  # raises when start-up failed
        assert runtime.feed is not None
        stats = runtime.feed.stats
        built = {"files": stats.seen, "chunks_embedded": stats.chunks_embedded,
                 "seconds": round(time.perf_counter() - started, 1)}
        reading = await runtime.reading()
        counts = await reading.index.run(lambda r: r.counts())
        metrics = await evaluate.evaluate(reading, dataset, cast(list[Mode], modes), params,
                                          name)
    return built, counts, metrics


async def check_search(config: Config, args: argparse.Namespace) -> int:
    """`pocketmcp check-search`: the index's own documents as questions (ops/selfcheck.py);
    with --apply, the best fusion weight is kept for the index and measured again."""
    if not 1 <= args.questions <= selfcheck.MAX_QUESTIONS:
        raise PocketError(f"--questions {args.questions} is not valid: it accepts 1 to "
                          f"{selfcheck.MAX_QUESTIONS}")
    place = config.main_place()
    if not await anyio.to_thread.run_sync(place.exists):
        raise no_index(config, args.indexes_seen)
    async with open_runtime(config, READING) as runtime:
        await runtime.started()
        reading = await runtime.reading()
        waiting = await reading.index.run(lambda r: r.waiting_count())
        if args.apply and waiting:
            raise NotReady(f"{waiting} chunks still wait for their vectors, so vector search "
                           "cannot be measured and no fusion weight is kept: run `pocketmcp "
                           "index` (or let the running server finish), then check again")
        report = await selfcheck.check(reading, most=args.questions,
                                       params=tuning.params_of(reading.index))
        least = min(selfcheck.MIN_QUESTIONS, args.questions)
        if report.questions < least:
            raise TooFewQuestions(
                f"the index's {report.documents} documents give {report.questions} questions "
                f"(titles, headings, first sentences named by one document alone); at least "
                f"{least} are needed to measure search and suggest a fusion weight")
        kept = None
        if args.apply and report.weight_suggested != report.weight_in_use:
            kept = tuning.save_weight(reading.index, report.weight_suggested)
    if args.json:
        out = {**msgspec.to_builtins(report), "kept": str(kept) if kept else None}
        print(json.dumps(out, indent=2))  # noqa: T201
        return 0
    print(check_table(report, kept))  # noqa: T201
    return 0


def counted(n: int, kind: str) -> str:
    """`n` questions of `kind`, in words: "1 alias", "3 aliases", "2 titles"."""
    return f"{n} {kind if n == 1 else kind + 'es' if kind.endswith('s') else kind + 's'}"


def check_table(report: selfcheck.SelfCheck, kept: Path | None) -> str:
    kinds = ", ".join(counted(n, k) for k, n in sorted(report.kinds.items()))
    lines = [f"{report.questions} questions from {report.documents} documents ({kinds}), "
             f"{report.seconds:.1f} s",
             "| mode | hit@1 | hit@5 | MRR@10 |", "| --- | --- | --- | --- |"]
    for mode, m in report.modes.items():
        lines.append(f"| {mode} | {m.hit1:.3f} | {m.hit5:.3f} | {m.mrr10:.3f} |")
    if report.rule:
        lines.append(report.rule)
    before = report.modes["hybrid"]
    after = report.hybrid_by_weight[f"{report.weight_suggested:.1f}"]
    if report.chunks_waiting:
        lines.append(f"{report.chunks_waiting} chunks wait for their vectors: vector search "
                     "does not find them yet, so the vector and hybrid figures are low and no "
                     "fusion weight is suggested; run `pocketmcp index` (or let the running "
                     "server finish), then check again")
    elif report.weight_suggested == report.weight_in_use:
        lines.append(f"fusion weight {report.weight_in_use:g} (vector share) is the best here")
    else:
        lines.append(
            f"fusion weight: {report.weight_in_use:g} in use, hybrid MRR@10 {before.mrr10:.3f} "
            f"hit@1 {before.hit1:.3f}; {report.weight_suggested:g} does best, MRR@10 "
            f"{after.mrr10:.3f} hit@1 {after.hit1:.3f}")
        lines.append(f"kept for this index in {kept}" if kept else
                     "run again with --apply to keep it for this index")
    return "\n".join(lines)
