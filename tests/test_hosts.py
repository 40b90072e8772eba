"""One host per index, one set of rules: a writer that fails is released, says why, and (for a
named database) the next write starts a new one; reads go on."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import anyio
from support.runtime import fake, make_config, running
from support.tools import Tools, refused

from pocketmcp.core.identity import Identity
from pocketmcp.errors import StoreError
from pocketmcp.store.sqlite.place import SqlitePlace
from pocketmcp.store.sqlite.writes import SqliteWriter

T = TypeVar("T")


class Disk:
    """Whether the disk under the indexes answers."""

    broken = False


class BreakingWriter(SqliteWriter):
    """A SQLite writer whose transactions fail while the disk is broken, as a COMMIT that
    cannot write does."""

    def batch(self, work: Callable[[], T], keys: Sequence[str]) -> T:
        if Disk.broken:
            raise StoreError("disk I/O error")
        return super().batch(work, keys)


class BreakingPlace(SqlitePlace, frozen=True):
    """A SQLite index (and its named databases) written through BreakingWriter."""

    def writer(self, identity: Identity, *, rebuild: bool = False) -> SqliteWriter:
        return BreakingWriter(self.path, identity, rebuild=rebuild)

    def database(self, name: str) -> BreakingPlace:
        return BreakingPlace((self.databases_dir / f"{name}.db").absolute(), self.databases_dir)


async def test_a_failed_writer_is_released_writes_say_why_and_reads_go_on(
        tmp_path: Path) -> None:
    config = make_config(tmp_path)
    place = BreakingPlace(config.store.sqlite_path, config.store.sqlite_path.parent / "databases")
    Disk.broken = False
    try:
        async with running(config, embedding=fake(config), place=place) as rt, Tools(
                rt) as tools:
            ids = await tools.add(("owls", "Owls hunt small mammals at night."))
            await tools("create_database", db_name="notes")
            await tools("insert_document", text="Newts live in ponds.", db_name="notes")
            Disk.broken = True
            with refused(StoreError, match="disk I/O error"):
                await tools("delete_documents", doc_ids=[ids["owls"]])
            with anyio.fail_after(20):
                while rt.status.phase != "failed":  # noqa: ASYNC110 - no event marks it
                    await anyio.sleep(0.05)
            with refused(StoreError, match="stopped: disk I/O error"):
                await tools.add(("bats", "Bats hunt insects at night."))
            # The main index is still read, as it was before the failure.
            found = await tools.search("owls mammals", mode="keyword")
            assert [m["doc_id"] for m in found] == [ids["owls"]]
            # A named database's failed writer is released too; the next write starts a
            # new one once the disk answers again.
            Disk.broken = False
            doc = await tools("insert_document", text="Frogs sing in spring.", db_name="notes")
            Disk.broken = True
            with refused(StoreError, match="disk I/O error"):
                await tools("delete_document", doc_id=doc["doc_id"], db_name="notes")
            Disk.broken = False
            deleted = await tools("delete_document", doc_id=doc["doc_id"], db_name="notes")
            assert deleted["deleted_chunks"] >= 1
    finally:
        Disk.broken = False
