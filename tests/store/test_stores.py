"""The store interface, the same tests over both stores: SQLite files and Postgres with
pgvector (a real server, started once per session)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.records import DIM, IDENTITY
from support.records import chunks as _chunks
from support.records import doc as _doc
from support.records import unit_vectors as _vectors

from pocketmcp.core.identity import Identity
from pocketmcp.core.secret import Secret
from pocketmcp.errors import ModelMismatchError, StoreError
from pocketmcp.messages import Chunk, DocFacts, DocRecord, Link, Written
from pocketmcp.store.api import Place, Reader, StoreWriter
from pocketmcp.store.filters import Compare, DocFilter
from pocketmcp.store.pg.place import PgPlace


def _open_writer(where: Place, identity: Identity = IDENTITY) -> StoreWriter:
    return where.writer(identity)


def _put(writer: StoreWriter, doc: DocRecord, chunks: tuple[Chunk, ...],
         vectors: np.ndarray) -> Written:
    def work() -> Written:
        with writer.item():
            return writer.upsert(doc, chunks, vectors.tobytes())
    return writer.batch(work, [doc.external_id])


async def test_a_document_reads_back_as_written_with_its_chunks(store) -> None:
    writer, index = store
    chunks = _chunks("alpha beta. ", "gamma delta.")
    written = _put(writer, _doc("a", *[c.text for c in chunks]), chunks, _vectors(2))
    assert written.status == "inserted" and written.chunks == 2
    row = await index.run(lambda r: r.document(written.doc_id))
    assert row is not None and row.external_id == "a" and row.chunk_count == 2
    assert await index.run(lambda r: r.content(written.doc_id)) == "alpha beta. gamma delta."
    assert await index.run(lambda r: r.counts()) == {"documents": 1, "chunks": 2, "waiting": 0}
    assert await index.run(lambda r: r.libraries()) == [("default", 1, 2)]
    parts = await index.run(lambda r: r.neighbours(written.doc_id, 0, 5))
    assert [p[3] for p in parts] == ["alpha beta. ", "gamma delta."]
    assert await index.run(lambda r: r.identity()) == IDENTITY


async def test_an_unchanged_document_keeps_its_chunks_and_a_changed_one_replaces_them(
        store) -> None:
    writer, _ = store
    chunks = _chunks("one. ", "two.")
    first = _put(writer, _doc("d", "one. ", "two."), chunks, _vectors(2))
    again = _put(writer, _doc("d", "one. ", "two."), chunks, _vectors(2))
    assert (again.doc_id, again.status) == (first.doc_id, "unchanged")
    new = _chunks("three.")
    changed = _put(writer, _doc("d", "three."), new, _vectors(1, seed=3))
    assert (changed.doc_id, changed.status, changed.chunks_removed) == (
        first.doc_id, "updated", 2)


async def test_removing_documents_names_what_was_not_there(store) -> None:
    writer, index = store
    a = _put(writer, _doc("a", "x."), _chunks("x."), _vectors(1))
    removed = writer.batch(lambda: writer.remove([a.doc_id, 999], ["nope"]), ["nope"])
    assert removed.doc_ids == (a.doc_id,) and removed.chunks == 1
    assert set(removed.not_found) == {"999", "nope"}
    assert await index.run(lambda r: r.counts()) == {"documents": 0, "chunks": 0, "waiting": 0}


def test_a_removed_documents_id_is_never_given_again(where: Place) -> None:
    """A client may still hold the id of a document removed (a resource, a search's
    doc_id): the next document never gets it, not even after a restart."""
    writer = _open_writer(where)
    a = _put(writer, _doc("a", "x."), _chunks("x."), _vectors(1))
    b = _put(writer, _doc("b", "y."), _chunks("y."), _vectors(1))
    writer.batch(lambda: writer.remove([b.doc_id], []), [])
    writer.close()
    writer = _open_writer(where)
    try:
        c = _put(writer, _doc("c", "z."), _chunks("z."), _vectors(1))
        writer.batch(lambda: writer.remove([a.doc_id], []), [])
        d = _put(writer, _doc("d", "w."), _chunks("w."), _vectors(1))
    finally:
        writer.close()
    assert a.doc_id < b.doc_id < c.doc_id < d.doc_id


async def test_the_nearest_chunk_to_a_stored_vector_is_its_own(store) -> None:
    writer, index = store
    vectors = _vectors(6, seed=1)
    texts = [f"chunk {i}. " for i in range(6)]
    a = _put(writer, _doc("a", *texts[:3]), _chunks(*texts[:3]), vectors[:3])
    b = _put(writer, _doc("b", *texts[3:]), _chunks(*texts[3:]), vectors[3:])

    def near(allowed: list[int] | None) -> tuple[list[int], list[float], list[int]]:
        async def run() -> Any:
            return await index.run(lambda r: index.nearest(r, vectors[4], 3, 1000, allowed))
        return run()

    ids, scores, docs = await near(None)
    assert docs[0] == b.doc_id and scores[0] == pytest.approx(1.0, abs=1e-3)
    assert list(scores) == sorted(scores, reverse=True)
    hits = await index.run(lambda r: r.hits([int(ids[0])]))
    assert hits[int(ids[0])].text == "chunk 4. "
    only_a = await near([a.doc_id])
    assert set(only_a[2].tolist()) == {a.doc_id} and len(only_a[0]) == 3
    stored = await index.run(lambda r: r.vectors_by_ids([int(ids[0])], DIM))
    assert np.allclose(stored[2][0], vectors[4], atol=1e-6)


async def test_keyword_search_finds_words_and_weighs_titles(store) -> None:
    writer, index = store
    titled = _put(writer, _doc("t", "Nothing about it here. ", title="Kubernetes"),
         _chunks("Nothing about it here. "), _vectors(1))
    body = _put(writer, _doc("b", "We deployed kubernetes on Friday. "),
                _chunks("We deployed kubernetes on Friday. "), _vectors(1, seed=2))
    _put(writer, _doc("c", "Unrelated gardening notes. "),
         _chunks("Unrelated gardening notes. "), _vectors(1, seed=4))
    found = await index.run(lambda r: r.keyword_stage(
        "kubernetes", 10, None, title_weight=1.0, total=3, documents=False))
    assert len(found.keyword) == 2 and found.reference > 0
    assert set(found.doc_of.values()) == {titled.doc_id, body.doc_id}
    only = await index.run(lambda r: r.keyword_stage(
        "kubernetes", 10, [body.doc_id], title_weight=1.0, total=3, documents=False))
    assert set(only.doc_of.values()) == {body.doc_id}
    partial = await index.run(lambda r: r.keyword_stage(  # not every word: any of them
        "kubernetes zebra", 10, None, title_weight=1.0, total=1000, documents=False))
    assert set(partial.doc_of.values()) == {titled.doc_id, body.doc_id}
    none = await index.run(lambda r: r.keyword_stage(
        "zebra", 10, None, title_weight=1.0, total=3, documents=False))
    assert none.keyword == {}


async def test_keyword_search_finds_chunks_holding_some_words_beside_those_holding_all(
        store) -> None:
    writer, index = store
    texts = {"all": "The zebra grazed beside the kubernetes cluster. ",
             "zebra": "A zebra crossed the savanna road. ",
             "kube": "Kubernetes pods restarted overnight. ",
             "none": "Unrelated gardening notes about tomatoes. "}
    ids = {name: _put(writer, _doc(name, text, title=f"note {i}"), _chunks(text),
                      _vectors(1, seed=i)).doc_id for i, (name, text) in enumerate(texts.items())}

    async def ranked(query: str) -> list[int]:
        found = await index.run(lambda r: r.keyword_stage(
            query, 10, None, title_weight=1.0, total=4, documents=False))
        return [found.doc_of[c] for c in sorted(found.keyword, key=lambda c: (
            -found.keyword[c], c))]

    both = await ranked("zebra kubernetes")  # one chunk holds both words, others one each
    assert both[0] == ids["all"] and set(both) == {ids["all"], ids["zebra"], ids["kube"]}
    some = await ranked("zebra pods")  # no chunk holds both
    assert set(some) == {ids["all"], ids["zebra"], ids["kube"]}


@pytest.mark.parametrize("where", ["postgres"], indirect=True)
async def test_a_word_written_with_a_minus_excludes_the_chunks_holding_it(store) -> None:
    writer, index = store
    texts = {"all": "The zebra grazed beside the kubernetes cluster. ",
             "zebra": "A zebra crossed the savanna road. "}
    ids = {name: _put(writer, _doc(name, text), _chunks(text), _vectors(1, seed=i)).doc_id
           for i, (name, text) in enumerate(texts.items())}
    found = await index.run(lambda r: r.keyword_stage(
        "zebra -kubernetes", 10, None, title_weight=1.0, total=2, documents=False))
    assert set(found.doc_of.values()) == {ids["zebra"]}
    quoted = await index.run(lambda r: r.keyword_stage(
        'zebra -"savanna road"', 10, None, title_weight=1.0, total=2, documents=False))
    assert set(quoted.doc_of.values()) == {ids["all"]}


async def test_filters_select_the_same_documents(store) -> None:
    writer, index = store
    docs = [
        _doc("n1", "a. ", library="work", metadata={"project": "apollo", "rank": 3},
             facts=DocFacts(tags=("project/apollo",), modified="2024-01-02T00:00:00Z")),
        _doc("n2", "b. ", library="home", metadata={"project": ["zeus", "hera"], "rank": 7},
             facts=DocFacts(tags=("garden",), modified="2025-06-01T00:00:00Z")),
        _doc("n3", "c. ", library="work", facts=DocFacts(properties={"project": "zeus"},
                                                       modified="2023-03-03T00:00:00Z")),
    ]
    ids = [_put(writer, d, _chunks(d.content), _vectors(1, seed=i)).doc_id
           for i, d in enumerate(docs)]

    async def select(**conditions: Any) -> list[int]:
        f = DocFilter(**conditions)
        return await index.run(lambda r: r.doc_ids_where(f))

    assert await select(library="work") == [ids[0], ids[2]]
    assert await select(tags_any=("project",)) == [ids[0]]
    assert await select(metadata=(Compare("project", "eq", "zeus"),)) == [ids[1], ids[2]]
    assert await select(metadata=(Compare("project", "in", ("apollo", "hera")),)) == ids[:2]
    assert await select(metadata=(Compare("rank", "gt", 5),)) == [ids[1]]
    assert await select(metadata=(Compare("rank", "exists", False),)) == [ids[2]]
    assert await select(modified_after="2025-01-01T00:00:00Z") == [ids[1]]
    page = await index.run(lambda r: r.documents_page(DocFilter(), 2, sort="path"))
    assert [p.external_id for p in page] == ["n1", "n2"]
    assert await index.run(lambda r: r.external_ids("n", "n1")) == ["n2", "n3"]


# Postgres text cannot hold NUL; SQLite's (whose files reach it without NUL) can.
@pytest.mark.parametrize("where", ["postgres"], indirect=True)
async def test_text_with_nul_characters_is_stored_with_its_offsets(store) -> None:
    writer, index = store
    text = "before\x00after. "
    written = _put(writer, _doc("z", text, "tail."), _chunks(text, "tail."), _vectors(2))
    parts = await index.run(lambda r: r.neighbours(written.doc_id, 0, 1))
    assert parts[1][3] == "tail." and len(parts[0][3]) == len(text)


def test_a_user_who_may_not_install_pgvector_is_told_who_may(pg_url: str, pg_schema: str
                                                             ) -> None:
    """A database without pgvector, and a user who may not create extensions in it: the
    error says what to ask of its administrator, and nothing is made."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    database, role = pg_schema, f"{pg_schema}_user"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{database}"')
        conn.execute(f"CREATE ROLE \"{role}\" LOGIN PASSWORD 'plain'")
    try:
        url = make_conninfo(pg_url, user=role, password="plain", dbname=database)
        with pytest.raises(StoreError, match="ask its administrator to run `CREATE "
                                             "EXTENSION vector;`"):
            _open_writer(PgPlace(Secret(url), "notes"))
        with psycopg.connect(make_conninfo(pg_url, dbname=database)) as conn:
            assert conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = 'notes'"
                                ).fetchone() == (0,)
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{database}" WITH (FORCE)')
            conn.execute(f'DROP ROLE "{role}"')


def test_an_index_refuses_another_model(where: Place) -> None:
    _open_writer(where).close()
    with pytest.raises(ModelMismatchError):
        _open_writer(where, Identity(model="other", dim=DIM))


@pytest.mark.parametrize("where", ["postgres"], indirect=True)
def test_two_writers_of_one_document_queue_and_the_second_finds_the_first(
        where: Place, pg_url: str) -> None:
    """Postgres takes writers in several processes: the second writer of a document waits
    for the first's commit, then finds the document there (unchanged), never a duplicate."""
    import psycopg

    first, second = _open_writer(where), _open_writer(where)
    doc, chunks = _doc("shared", "same text. "), _chunks("same text. ")
    inside, release = threading.Event(), threading.Event()
    results: dict[str, Any] = {}

    def hold() -> Written:
        with first.item():
            written = first.upsert(doc, chunks, _vectors(1).tobytes())
        inside.set()
        release.wait(20)  # committed only once the second writer is waiting
        return written

    def run(name: str, writer: StoreWriter, work: Any) -> None:
        try:
            results[name] = writer.batch(work, [doc.external_id])
        except Exception as exc:
            results[name] = exc

    def upsert_again() -> Written:
        with second.item():
            return second.upsert(doc, chunks, _vectors(1).tobytes())

    threads = [threading.Thread(target=run, args=("first", first, hold))]
    threads[0].start()
    assert inside.wait(20)
    threads.append(threading.Thread(target=run, args=("second", second, upsert_again)))
    threads[1].start()
    deadline = time.monotonic() + 20
    with psycopg.connect(pg_url, autocommit=True) as conn:
        while not conn.execute(b"SELECT count(*) FROM pg_stat_activity WHERE "
                               b"wait_event_type = 'Lock'").fetchone()[0]:
            assert time.monotonic() < deadline, "the second writer never waited"
            time.sleep(0.01)
    release.set()
    for thread in threads:
        thread.join(20)
    first.close()
    second.close()
    assert isinstance(results["first"], Written), results
    assert isinstance(results["second"], Written), results
    assert results["second"].doc_id == results["first"].doc_id
    assert (results["first"].status, results["second"].status) == ("inserted", "unchanged")


@pytest.mark.parametrize("where", ["postgres"], indirect=True)
async def test_a_batch_whose_connection_drops_is_run_again_on_a_new_one(
        store, pg_url: str) -> None:
    import psycopg

    writer, index = store
    runs: list[int] = []

    def work() -> Written:
        runs.append(1)
        if len(runs) == 1:  # the server ends this writer's session mid-transaction
            pid = writer._conn.info.backend_pid  # type: ignore[attr-defined]
            with psycopg.connect(pg_url, autocommit=True) as conn:
                conn.execute(b"SELECT pg_terminate_backend(%s)", (pid,))
        with writer.item():
            return writer.upsert(_doc("r", "kept. "), _chunks("kept. "), _vectors(1).tobytes())

    written = writer.batch(work, ["r"])
    assert len(runs) == 2 and written.status == "inserted"
    assert await index.run(lambda r: r.counts()) == {"documents": 1, "chunks": 1, "waiting": 0}


@pytest.mark.usefixtures("processes")
def test_a_server_that_cannot_be_reached_is_a_store_error_without_the_password(
        tmp_path: Path) -> None:
    env = {**os.environ, "STORE": "postgres", "PG_SCHEMA": "nowhere",
           "DATABASE_URL": "postgresql://someone:hunter2secret@127.0.0.1:9/nothing",
           "SQLITE_PATH": str(tmp_path / "x.db"), "WATCH_DIR": str(tmp_path)}
    with pytest.raises(StoreError) as caught:
        PgPlace(Secret(env["DATABASE_URL"]), "nowhere").identity()
    assert "hunter2secret" not in str(caught.value)
    run = subprocess.run([sys.executable, "-m", "pocketmcp", "search", "anything"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and "cannot connect" in run.stderr
    assert "hunter2secret" not in run.stderr + run.stdout


async def test_links_resolve_to_documents_written_before_or_after(store) -> None:
    writer, index = store
    facts = DocFacts(links=(Link("B", "b", "wiki"), Link("Nowhere", "nowhere", "wiki")))
    a = _put(writer, _doc("a", "See [[B]]. ", facts=facts), _chunks("See [[B]]. "),
             _vectors(1))
    b = _put(writer, _doc("b", "Bee."), _chunks("Bee."), _vectors(1, seed=2))

    def read(reader: Reader) -> tuple[list[Any], list[Any], list[Any]]:
        return (reader.outgoing_links(a.doc_id), reader.incoming_links(b.doc_id),
                reader.incoming_links(a.doc_id))

    out, into_b, into_a = await index.run(read)
    assert [(o.idx, o.target, o.kind, o.doc_id) for o in out] == [
        (0, "B", "wiki", b.doc_id), (1, "Nowhere", "wiki", None)]
    assert [i.doc_id for i in into_b] == [a.doc_id] and into_a == []
    # The same text with other links: its links change, its chunks stay.
    again = _put(writer, _doc("a", "See [[B]]. ", facts=DocFacts()), _chunks("See [[B]]. "),
                 _vectors(1))
    assert (again.status, again.chunks_removed) == ("updated", 0)
    out, into_b, _ = await index.run(read)
    assert out == [] and into_b == []


@pytest.mark.parametrize("where", ["postgres"], indirect=True)
async def test_a_postgres_index_made_before_links_were_kept_gets_its_notes_links(
        where: PgPlace, monkeypatch: pytest.MonkeyPatch) -> None:
    from pocketmcp.store.pg import connect, schema

    with monkeypatch.context() as patch:  # the index as the first version made it
        patch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:1])
        patch.setattr(schema, "SCHEMA_VERSION", 1)
        _open_writer(where).close()
    with connect.connect(where, autocommit=True) as conn:
        for ext, text in (("a", "See [[B]] and [[C]]."), ("b", "Bee.")):
            conn.execute(b"INSERT INTO documents(external_id, source, content, content_sha256, "
                         b"created_at, updated_at) VALUES (%s, 'raw', %s, 'x', 'now', 'now')",
                         (ext, text))
    _open_writer(where).close()  # migrates
    index = where.reader(DIM)
    try:
        by_ext = dict((e, d) for d, e in await index.run(lambda r: r.all_external_ids()))
        out = await index.run(lambda r: r.outgoing_links(by_ext["a"]))
        assert [(o.target, o.doc_id) for o in out] == [("B", by_ext["b"]), ("C", None)]
    finally:
        index.close()


@pytest.mark.parametrize("where", ["postgres"], indirect=True)
def test_a_new_postgres_index_gets_the_hnsw_graph_asked_for_and_keeps_it(
        where: Place, pg_url: str) -> None:
    import psycopg  # an optional dependency, installed for the tests

    assert isinstance(where, PgPlace)
    denser = PgPlace(where.url, where.schema, hnsw_m=24, hnsw_ef_construction=128)
    _open_writer(denser).close()
    _open_writer(PgPlace(where.url, where.schema)).close()  # the defaults: kept as made

    with psycopg.connect(pg_url) as conn:
        row = conn.execute(b"SELECT indexdef FROM pg_indexes WHERE schemaname = %s AND "
                           b"indexname = 'chunks_embedding'", (where.schema,)).fetchone()
    assert row is not None and "m='24'" in row[0] and "ef_construction='128'" in row[0]
