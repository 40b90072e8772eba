"""Starting the shared server, part by part, with real processes: the start lock another
process holds, and a server that publishes itself and then dies at start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from pocketmcp.errors import SharingFailed
from pocketmcp.mcp import discovery, sharing
from pocketmcp.store.places import at_file

pytestmark = pytest.mark.usefixtures("processes")

HOLD = ("import sys, time\n"
        "from filelock import FileLock\n"
        "lock = FileLock(sys.argv[1], thread_local=False)\n"
        "lock.acquire()\n"
        "print('held', flush=True)\n"
        "time.sleep(60)\n")

PUBLISH_AND_DIE = ("import os, sys\n"
                   "from pathlib import Path\n"
                   "from pocketmcp.mcp import discovery\n"
                   "from pocketmcp.store.places import at_file\n"
                   "index = Path(sys.argv[1])\n"
                   "discovery.publish(at_file(index), discovery.Published("
                   "url='http://127.0.0.1:9', pid=os.getpid(), index=str(index), "
                   "token_file=None, version='0'))\n"
                   "sys.exit(3)\n")


def python(code: str, *args: str, stdout: int | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=stdout)


async def test_the_start_lock_waits_for_another_process_then_is_taken(tmp_path: Path) -> None:
    index = at_file(tmp_path / "data" / "index.db")
    (tmp_path / "data").mkdir()
    holder = python(HOLD, str(sharing.lock_file(index)), stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        with anyio.fail_after(20):
            with pytest.raises(SharingFailed, match=r"has held .* while starting"):
                async with sharing.start_lock(index, timeout_s=0.5):
                    pass
            holder.kill()
            holder.wait()
            async with sharing.start_lock(index, timeout_s=10):
                # held here: a second taker waits for it
                with pytest.raises(SharingFailed):
                    async with sharing.start_lock(index, timeout_s=0.2):
                        pass
            async with sharing.start_lock(index, timeout_s=1):  # released
                pass
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()


@pytest.mark.skipif(not hasattr(os, "waitid"), reason="waitid: to order the two processes")
async def test_a_server_dying_once_published_is_reported_with_its_exit_code(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    file = tmp_path / "data" / "index.db"
    process = python(PUBLISH_AND_DIE, str(file))
    read = discovery._read

    def read_once_it_ended(path: Path) -> discovery.Published | None:
        # The discovery file is read just after the server ended (not reaped: its code kept),
        # as happens when it dies between two looks.
        if path.exists():
            os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)
        return read(path)

    monkeypatch.setattr(discovery, "_read", read_once_it_ended)
    try:
        with anyio.fail_after(30), pytest.raises(SharingFailed,
                                                 match=r"exited at start \(code 3\)"):
            await sharing.wait_published(at_file(file), process, timeout_s=20)
    finally:
        process.kill()
        process.wait()
