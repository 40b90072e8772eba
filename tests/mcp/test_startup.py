"""What the stdio server does for its start-up: the garbage collector waits until it has
started (the imports on the way make objects by the hundred thousand and free none)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from conftest import running

from pocketmcp.config import Config
from pocketmcp.mcp import host


@pytest.fixture
def collector_off() -> Iterator[None]:
    """The garbage collector off, as `pocketmcp serve` starts; on and unfrozen afterwards."""
    gc.disable()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.enable()


@pytest.mark.usefixtures("collector_off")
async def test_the_collector_is_back_on_with_start_up_frozen_once_the_runtime_is_ready(
    config: Config
) -> None:
    async with running(config) as rt:
        assert not gc.isenabled()  # the runtime's start does not turn it on by itself
        await host._collect_once_started(rt)
        assert gc.isenabled()
        assert gc.get_freeze_count() > 10_000  # modules, classes and models of start-up
