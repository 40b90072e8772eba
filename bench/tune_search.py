"""Sweep the hybrid search's tuning on a BEIR data set, to choose defaults by measurement.

Needs an index kept by `pocketmcp eval DATASET --index PATH`; every query goes through the
same `search` code path as the MCP tool. Prints nDCG@10 / Recall@100 / MRR@10 per setting.

    .venv/bin/pocketmcp eval ../shared/datasets/scifact-train --index /tmp/scifact.db
    .venv/bin/python bench/tune_search.py --index /tmp/scifact.db
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

import anyio
import msgspec

ROOT = Path(__file__).resolve().parents[1]
DATASET = ROOT.parent / "shared" / "datasets" / "scifact-train"


async def main() -> None:
    from pocketmcp.config import load
    from pocketmcp.ops.evaluate import evaluate, load_dataset
    from pocketmcp.ops.search import Params
    from pocketmcp.plans import READING
    from pocketmcp.runtime import open_runtime

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--grid", default='{"fusion": ["convex", "rrf"], '
                        '"vector_weight": [0.3, 0.4, 0.5, 0.6, 0.7], "title_weight": [1.0]}',
                        help="JSON: Params field -> list of values")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "tune.json")
    args = parser.parse_args()
    dataset = load_dataset(args.dataset)
    config = load({}, environ={"SQLITE_PATH": str(args.index),
                               "WATCH_DIR": str(args.index) + ".corpus"})
    grid = json.loads(args.grid)
    rows = []
    async with open_runtime(config, READING) as runtime:
        await runtime.started()
        reading = await runtime.reading()
        for values in itertools.product(*grid.values()):
            params = msgspec.convert(dict(zip(grid, values, strict=True)), Params)
            metrics = (await evaluate(reading, dataset, ["hybrid"], params))["hybrid"]
            row = {**dict(zip(grid, values, strict=True)), **metrics}
            rows.append(row)
            print(json.dumps(row), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    anyio.run(main)
