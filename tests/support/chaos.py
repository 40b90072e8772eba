"""The reliability suite's parts: kill -9 rounds during indexing and during tool writes, the
invariants checked after each, a corpus of bad input, and a load run.

Used by tests/test_chaos.py (short forms, bounded in count and time) and by
scripts/reliability.py (the long forms, which print their counts). Everything runs the real
server as a subprocess on real files.

Invariants of an index after any stop, however abrupt:
- `PRAGMA integrity_check` is ok;
- no partial document: every document has exactly `chunk_count` chunks, each with a vector
  unless it waits for one (written for keywords first), and no chunk or vector belongs to
  no document;
- every write a client was told had committed is there;
- after a recovery run (`pocketmcp index`), the watched documents are exactly the folder's
  files.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pocketmcp.store.sqlite.connect import open_sync_reader
from support.cli import command_for
from support.protocol_fuzz import StdioPeer

WORDS = ["otter", "heron", "lichen", "basalt", "quartz", "fjord", "tundra", "mango", "cedar",
         "walrus", "comet", "prism", "saffron", "glacier", "falcon", "sequoia", "lantern",
         "harbor", "canyon", "meadow"]


def sentence(rng: random.Random, words: int = 12) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def document(rng: random.Random, token: str, paragraphs: int) -> str:
    """A Markdown text carrying `token` once, `paragraphs` paragraphs long."""
    parts = [f"# Note {token}", f"The marker {token} names this note."]
    parts += [" ".join(sentence(rng) for _ in range(6)) for _ in range(paragraphs)]
    return "\n\n".join(parts) + "\n"


# -- invariants --------------------------------------------------------------------------------

@dataclass
class Findings:
    integrity: str = ""
    documents: int = 0
    partial: list[int] = field(default_factory=list)  # documents missing chunks or vectors
    orphans: int = 0  # chunks or vectors of no document
    missing: list[str] = field(default_factory=list)  # acknowledged writes not found

    @property
    def ok(self) -> bool:
        return self.integrity == "ok" and not self.partial and not self.orphans \
            and not self.missing


def check_index(db: Path, acknowledged: set[str] | None = None) -> Findings:
    """The invariants of the index at `db` (no writer need be running). No index file is a
    finding: every caller checks an index that was made."""
    found = Findings()
    if not db.exists():
        found.integrity = f"no index file at {db}"
        found.missing = sorted(acknowledged or ())
        return found
    conn = open_sync_reader(db)
    try:
        found.integrity = "; ".join(str(r[0]) for r in conn.execute("PRAGMA integrity_check"))
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        if "documents" not in tables:
            found.missing = sorted(acknowledged or ())
            return found
        found.documents = conn.execute("SELECT count(*) FROM documents").fetchone()[0]
        found.partial = [r[0] for r in conn.execute(
            "SELECT d.doc_id FROM documents d WHERE d.chunk_count != "
            "(SELECT count(*) FROM chunks c WHERE c.doc_id = d.doc_id) OR "
            "(SELECT count(*) FROM chunks c WHERE c.doc_id = d.doc_id AND c.waiting = 0) != "
            "(SELECT count(*) FROM vec_chunks v WHERE v.doc_id = d.doc_id)")]
        found.orphans = conn.execute(
            "SELECT (SELECT count(*) FROM chunks WHERE doc_id NOT IN "
            "(SELECT doc_id FROM documents)) + (SELECT count(*) FROM vec_chunks WHERE "
            "doc_id NOT IN (SELECT doc_id FROM documents))").fetchone()[0]
        if acknowledged:
            present = {r[0] for r in conn.execute("SELECT external_id FROM documents")}
            found.missing = sorted(acknowledged - present)
    finally:
        conn.close()
    return found


def watched_files(db: Path) -> set[str]:
    """The folder paths the index holds as watched documents."""
    conn = open_sync_reader(db)
    try:
        return {r[0][len("file:"):] for r in conn.execute(
            "SELECT external_id FROM documents WHERE source = 'file'")}
    finally:
        conn.close()


def folder_files(kb: Path) -> set[str]:
    return {p.relative_to(kb).as_posix() for p in kb.rglob("*") if p.is_file()}


# -- processes ---------------------------------------------------------------------------------

def env_for(root: Path, **extra: str) -> dict[str, str]:
    from support.mcp_harness import server_env  # the harness imports the SDK client: only here

    return server_env(root, **extra)


def run_index(root: Path, env: dict[str, str], timeout_s: float
              ) -> tuple[int, dict[str, Any], list[dict[str, Any]]]:
    """`pocketmcp index --json` to the end: (exit code, its summary, its log lines)."""
    done = subprocess.run([*command_for(env), "index", "--json"], env=env,
                          cwd=root, capture_output=True, text=True, timeout=timeout_s)
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    summary = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {}
    return done.returncode, summary, lines


def kill_after(process: subprocess.Popen[bytes], seconds: float) -> bool:
    """SIGKILL `process` after `seconds` unless it ended first; whether it was killed."""
    try:
        process.wait(seconds)
        return False
    except subprocess.TimeoutExpired:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        return True


@dataclass
class Rounds:
    """Counts of a series of rounds."""

    counts: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    def record(self, name: str, findings: Findings) -> None:
        self.counts["rounds"] += 1
        if findings.ok:
            self.counts["rounds_ok"] += 1
        else:
            self.failures.append(f"{name}: {findings}")


def index_kill_round(root: Path, env: dict[str, str], rng: random.Random, rounds: Rounds, *,
                     command: str, within_s: float) -> None:
    """Start `pocketmcp index` or `watch`, SIGKILL it at a random moment of the `within_s`
    seconds after its index file exists, check. A run that ends before its kill is a failed
    round: the work must outlast `within_s` (`watch` does; for `index`, a large folder or a
    provider that does not answer)."""
    db = root / "data" / "index.db"
    name = f"{command} round {rounds.counts['rounds']}"
    with open(root / f"{command}.err", "ab") as errlog:
        process = subprocess.Popen([sys.executable, "-m", "pocketmcp", command], env=env,
                                   cwd=root, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=errlog)
    deadline = time.monotonic() + 120
    while not db.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    killed = kill_after(process, rng.uniform(0, within_s))
    rounds.counts["killed" if killed else "finished_first"] += 1
    if not killed:
        rounds.failures.append(f"{name}: the run ended (exit {process.returncode}) before "
                               "the kill came")
    rounds.record(name, check_index(db))


def recover(root: Path, env: dict[str, str], rounds: Rounds, timeout_s: float) -> None:
    """A full `pocketmcp index`; then the index must hold exactly the folder's files."""
    code, summary, _ = run_index(root, env, timeout_s)
    db = root / "data" / "index.db"
    findings = check_index(db)
    rounds.record("recovery", findings)
    held, files = watched_files(db), folder_files(root / "kb")
    rounds.counts["recovered_files"] = len(held)
    if code != 0 or held != files:
        rounds.failures.append(f"recovery: exit {code}, {len(files - held)} files missing, "
                               f"{len(held - files)} extra; {summary}")
    else:
        rounds.counts["recoveries_ok"] += 1


def tool_write_round(root: Path, env: dict[str, str], rng: random.Random, rounds: Rounds, *,
                     acknowledged: set[str], writes: int, stop: str) -> None:
    """Upsert documents one call at a time through a real stdio server, then stop it in the
    middle of one more (`stop`: "kill" for SIGKILL, "eof" for the client going away); every
    acknowledged write must be there afterwards, and no partial document."""
    peer = StdioPeer(root, env)
    try:
        peer.handshake()
        deadline = time.monotonic() + 120  # the model loads (slowly on a busy machine)
        while not peer.request(0, "tools/call", {"name": "status", "arguments": {}})[
                "result"]["structuredContent"]["model_ready"]:
            assert time.monotonic() < deadline, "the model did not load"
            time.sleep(0.1)
        base = rounds.counts["rounds"] * 1000
        for i in range(writes):
            ident = f"w{base + i}"
            reply = peer.request(base + i + 1, "tools/call", {
                "name": "upsert_documents", "arguments": {"docs": [{
                    "external_id": ident, "text": document(rng, ident, rng.randint(1, 8))}]}})
            if reply.get("result", {}).get("isError") is not True:
                acknowledged.add(ident)
                rounds.counts["acknowledged"] += 1
        last = f"w{base + writes}"  # the write in flight when the stop comes
        peer.send(json.dumps({"jsonrpc": "2.0", "id": base + writes + 1, "method": "tools/call",
                              "params": {"name": "upsert_documents", "arguments": {"docs": [{
                                  "external_id": last,
                                  "text": document(rng, last, 40)}]}}}).encode())
        time.sleep(rng.uniform(0, 0.5))  # a random moment of the write
        if stop == "kill":
            os.kill(peer.process.pid, signal.SIGKILL)
        else:
            assert peer.process.stdin is not None
            peer.process.stdin.close()
        started = time.monotonic()
        peer.process.wait(30)
        rounds.counts[f"stopped_by_{stop}"] += 1
        if stop == "eof" and time.monotonic() - started > 5:
            rounds.failures.append(f"the server took {time.monotonic() - started:.1f} s to "
                                   "stop after its client went away")
    finally:
        if peer.process.poll() is None:
            peer.process.kill()
        peer.close()
    rounds.record(f"tool write round {rounds.counts['rounds']} ({stop})",
                  check_index(root / "data" / "index.db", acknowledged))
