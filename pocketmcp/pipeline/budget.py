"""INDEX_CPU_BUDGET: indexing pauses between batches to keep the process's CPU use under a
share of the machine.

The process's CPU time (every thread's: the model's, the writer's, and any search running
meanwhile, so the budget errs on the side of pausing) is compared with the wall time over a
window of a few seconds; once it is over the budget, the next batch waits until the average
is back under it.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable

import anyio

from pocketmcp.convert.limits import usable_cores

WINDOW_S = 3.0  # the span the average is taken over
MAX_PAUSE_S = 2.0  # the longest one pause


def threads_within(percent: int, cores: int | None = None) -> int:
    """The threads indexing may run (the model's for documents, the OCR worker's) within
    `percent` of the machine: that share of the cores, at least one; 0 (each part's own
    rule) without a budget."""
    if not percent:
        return 0
    return max(1, math.ceil(percent / 100 * (cores or usable_cores())))


class CpuBudget:
    """`percent` of the machine's `cores`, measured on the clocks `cpu` (the process's CPU
    time) and `wall`."""

    def __init__(self, percent: int, cores: int | None = None, *,
                 cpu: Callable[[], float] = time.process_time,
                 wall: Callable[[], float] = time.monotonic) -> None:
        self.cores_worth = percent / 100 * (cores or os.cpu_count() or 1)
        self.paused_s = 0.0  # time spent pausing, in all
        self._cpu_clock = cpu
        self._wall_clock = wall
        self._start()

    def _start(self) -> None:
        self._cpu = self._cpu_clock()
        self._wall = self._wall_clock()

    def owed(self) -> float:
        """Seconds to wait for the CPU used in this window to fit the budget."""
        used = self._cpu_clock() - self._cpu
        return used / self.cores_worth - (self._wall_clock() - self._wall)

    async def pace(self) -> None:
        """Wait, if need be, after a batch; a new window begins every WINDOW_S."""
        wait = min(self.owed(), MAX_PAUSE_S)
        if wait > 0:
            self.paused_s += wait
            await anyio.sleep(wait)
        if self._wall_clock() - self._wall >= WINDOW_S:
            self._start()
