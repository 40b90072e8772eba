"""The bounds of document conversion: how many workers, how long, how much memory."""

from __future__ import annotations

import msgspec


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    workers: int = 2
    timeout_s: float = 60.0
    memory_mb: int = 1024
    max_chars: int = 20 * 2**20
    max_unpacked: int = 512 * 2**20
    idle_s: float = 60.0
