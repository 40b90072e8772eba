"""Kill -9 a writer in the middle of its vector file updates, again and again; after each kill,
vector searches must equal an exact scan of what SQLite holds.

Each round runs a child process that commits batches (new documents, some of them written
for keywords first with their vectors given in a later batch, in any order, so that rows
reach the file out of id order; and deletions of earlier ones) through the store's
SqliteWriter, so its vector file is appended to, flipped, grown and rewritten, and kills it
with SIGKILL at a random moment. Then, on the index as the
kill left it: a read-only VectorIndex (what another process's search sees at once), and
after the writer has reopened and repaired the file, a fresh one. Both must give, for every
query, the same chunks as an exact float32 scan of SQLite's vectors (up to float16 ties).
Prints one JSON line of counts; exits 1 if any round failed.

    .venv/bin/python scripts/crash_vectors.py --rounds 20
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from pocketmcp.core.chunking import stored_chunk
from pocketmcp.core.identity import Identity
from pocketmcp.core.text import sha256
from pocketmcp.messages import Chunk, DocRecord
from pocketmcp.store.sqlite.connect import open_sync_reader
from pocketmcp.store.sqlite.queries import SqliteReader
from pocketmcp.store.sqlite.vectors.file import Columns, State
from pocketmcp.store.sqlite.vectors.index import VectorIndex
from pocketmcp.store.sqlite.writes import SqliteWriter

DIM = 32
PER_DOC = 4
TIE = 2e-3  # float16 scores may swap chunks whose exact scores are this close
PAUSE_S = 0.1  # in the child, before each state slot is written
WAIT = 0.4  # of documents written for keywords first, their vectors in a later batch
EVERY_ROW = 1 << 40  # every row rescored: the file's contents are checked, not the 1-bit passes


def _vectors(rng: np.random.Generator, n: int) -> np.ndarray:
    rows = rng.normal(size=(n, DIM)) + 1.5
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def child(db: Path, seed: int) -> None:
    """Commit batches until killed. Each update of the vector file pauses before its state
    slot is written (rows appended, removals flipped), so most kills land there."""
    rng = np.random.default_rng(seed)
    write_state = Columns.write_state

    def slow_write_state(self: Columns, state: State) -> None:
        time.sleep(PAUSE_S)
        write_state(self, state)

    Columns.write_state = slow_write_state  # type: ignore[method-assign]
    writer = SqliteWriter(db, Identity(model="m", dim=DIM))
    reader = SqliteReader(db)
    try:  # documents an earlier round left waiting for their vectors
        waiting = [(w.doc_id, w.sha256, tuple(
            stored_chunk(c.idx, c.start_off, c.end_off, c.text, c.tokens, c.text_sha256,
                         c.section) for c in w.chunks)) for w in reader.embed_backlog(10**5)]
    finally:
        reader.close()
    print("ready", flush=True)
    doc = int(time.time() * 1000) % 10**9  # fresh names each round
    while True:
        writer.begin()
        for _ in range(int(rng.integers(1, 40))):
            doc += 1
            chunks = tuple(Chunk(idx=i, start=i, end=i + 1, text=f"c{doc}-{i}", tokens=2,
                                 sha256=sha256(f"{doc}-{i}")) for i in range(PER_DOC))
            keywords_first = rng.random() < WAIT
            written = writer.upsert(
                DocRecord(external_id=f"d{doc}", source="raw", uri=None, title="",
                          content="x" * PER_DOC, sha256=str(doc)),
                chunks, None if keywords_first else _vectors(rng, PER_DOC).tobytes())
            if keywords_first:
                waiting.append((written.doc_id, str(doc), chunks))
        for _ in range(int(rng.integers(0, len(waiting) + 1))):  # in any order
            doc_id, text_sha, waited = waiting.pop(int(rng.integers(len(waiting))))
            writer.add_vectors(doc_id, text_sha, waited,  # False when deleted since
                               _vectors(rng, len(waited)).tobytes())
        for _ in range(int(rng.integers(0, 12))):
            writer.delete(f"d{doc - int(rng.integers(1, 400))}")
        writer.commit()


def _exact(db: Path) -> tuple[np.ndarray, np.ndarray]:
    conn = open_sync_reader(db)
    try:
        rows = conn.execute("SELECT chunk_id, embedding FROM vec_chunks").fetchall()
    finally:
        conn.close()
    ids = np.asarray([r[0] for r in rows], np.int64)
    vectors = np.frombuffer(b"".join(bytes(r[1]) for r in rows), np.float32).reshape(-1, DIM)
    return ids, vectors


def wrong_searches(db: Path, queries: np.ndarray, k: int = 10
                   ) -> tuple[int, str | None, int]:
    """Queries whose vector search differs from an exact scan of SQLite (plus one if the
    chunk count differs), why SQLite answered instead of the file (None: the file did), and
    how many log entries the file's slot was behind what SQLite had committed."""
    ids, vectors = _exact(db)
    reader = SqliteReader(db)
    index = VectorIndex(db, DIM)
    wrong = 0
    try:
        for q in queries:
            got, _, _ = index.search(reader.log, q, k, candidates=EVERY_ROW)
            exact = vectors @ q
            order = np.argsort(-exact)
            floor = exact[order[min(k, len(ids)) - 1]] if len(ids) else 0.0
            score = dict(zip(ids.tolist(), exact.tolist(), strict=True))
            if (len(got) != min(k, len(ids)) or len(set(got.tolist())) != len(got)
                    or any(c not in score or score[c] < floor - TIE for c in got.tolist())):
                wrong += 1
        if index.live != len(ids):  # the file's own count disagrees with SQLite's
            wrong += 1
        return wrong, index.reason, index.behind
    finally:
        reader.close()


def one_round(db: Path, seed: int, rng: np.random.Generator) -> dict[str, object]:
    script = Path(__file__).resolve()
    proc = subprocess.Popen([sys.executable, str(script), "--child", str(db), str(seed)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the writer did not start")
        time.sleep(float(rng.uniform(0.2, 1.2)))  # let it commit and update, then kill it
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    queries = _vectors(rng, 20)
    before, reason, behind = wrong_searches(db, queries)
    writer = SqliteWriter(db, Identity(model="m", dim=DIM))
    try:
        writer.repair_vectors()
        state = writer.vectors.state
    finally:
        writer.close()
    after, after_reason, _ = wrong_searches(db, queries)
    return {"wrong_before_repair": before, "answered_by": "sqlite" if reason else "file",
            "file_behind": behind,
            "wrong_after_repair": after, "file_after_repair": after_reason is None,
            "rows": 0 if state is None else state.live}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--child", nargs=2, metavar=("DB", "SEED"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(Path(args.child[0]), int(args.child[1]))
        return
    rng = np.random.default_rng(args.seed)
    counts = {"rounds": 0, "bad_rounds": 0, "answered_by_file": 0, "answered_by_sqlite": 0,
              "killed_with_file_behind": 0, "rows": 0}
    with tempfile.TemporaryDirectory(prefix="pocketmcp-crash-") as tmp:
        db = Path(tmp) / "index.db"
        for i in range(args.rounds):
            result = one_round(db, args.seed * 1000 + i, rng)
            counts["rounds"] += 1
            counts[f"answered_by_{result['answered_by']}"] += 1
            counts["rows"] = int(str(result["rows"]))
            counts["killed_with_file_behind"] += int(str(result["file_behind"])) > 0
            if result["wrong_before_repair"] or result["wrong_after_repair"] or not result[
                    "file_after_repair"]:
                counts["bad_rounds"] += 1
                print(json.dumps({"round": i, **result}), file=sys.stderr)
    print(json.dumps(counts))
    sys.exit(1 if counts["bad_rounds"] else 0)


if __name__ == "__main__":
    main()
