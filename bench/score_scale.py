"""What a search `score` means on the real-documents set, for the index's embedding model.

Runs every question of `bench/realdocs` through the search op as the `search` tool does
(hybrid, top 8, at most 2 matches a document, no threshold) and reports the share of the
relevant matches scoring 0.2, 0.3 and 0.5 or more, their median, and the best score of
questions from outside the corpus. The model is the index's: the EMBED_* settings come from
the environment, as for `pocketmcp eval`.

    .venv/bin/pocketmcp eval bench/realdocs --corpus FOLDER --index /tmp/rd.db
    .venv/bin/python bench/score_scale.py --index /tmp/rd.db --corpus FOLDER
    .venv/bin/python bench/score_scale.py --index /tmp/rd.db --corpus FOLDER \\
        --params '{"calibrated": false}'
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path

import anyio
import msgspec

ROOT = Path(__file__).resolve().parents[1]
OFF_TOPIC = ("how do I bake sourdough bread", "quarterly revenue of a shoe company",
             "which vintage car won the rally in Monaco", "symptoms of the flu in children",
             "the best way to fold a paper crane", "what time does the train to Berlin leave")


async def measure(index: Path, corpus: Path, params_json: str) -> dict[str, object]:
    from pocketmcp.config import load
    from pocketmcp.ops.evaluate import load_dataset
    from pocketmcp.ops.ranking import Params
    from pocketmcp.ops.search import search
    from pocketmcp.plans import READING
    from pocketmcp.runtime import open_runtime

    dataset = load_dataset(ROOT / "bench" / "realdocs", corpus=False)
    params = msgspec.convert(json.loads(params_json), Params)
    provider = {k: v for k, v in os.environ.items() if k.startswith("EMBED_")}
    config = load({}, environ={**provider, "SQLITE_PATH": str(index),
                               "WATCH_DIR": str(corpus)})
    relevant: list[float] = []
    async with open_runtime(config, READING) as runtime:
        await runtime.started()
        reading = await runtime.reading()
        for qid, text in dataset.queries.items():
            found = await search(reading, text, top_k=8, params=params)
            relevant += [m.score for m in found.matches if m.path in dataset.qrels[qid]]
        off = {text: max([m.score for m in (await search(reading, text, top_k=8,
                                                            params=params)).matches] or [0.0])
               for text in OFF_TOPIC}

    def share(at: float) -> float:
        return round(sum(s >= at for s in relevant) / len(relevant), 3)

    return {"index": str(index), "params": params_json, "relevant_matches": len(relevant),
            "at_least_0.2": share(0.2), "at_least_0.3": share(0.3), "at_least_0.5": share(0.5),
            "median": round(statistics.median(relevant), 3),
            "off_topic_best": {k: round(v, 3) for k, v in off.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--params", default="{}")
    args = parser.parse_args()
    print(json.dumps(anyio.run(measure, args.index, args.corpus, args.params), indent=1))


if __name__ == "__main__":
    main()
