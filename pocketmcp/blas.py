"""How many threads numpy's own OpenBLAS uses for products on the calling thread."""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import cast

import numpy as np


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """Products inside run on the calling thread alone (numpy's own OpenBLAS; elsewhere a
    no-op). OpenBLAS hands even a 2000 x 384 product to its threads, whose start and spin
    cost far more than the product on two busy cores (16 ms against 0.08 ms while other
    work ran) and take a core from the keyword query running beside it. Each row's sum is
    computed as before (only the last rows of a thread's share take the kernel's other
    path, and which rows those are already depended on the number of threads)."""
    local = _blas_threads_setter()
    if local is None:
        yield
        return
    previous = local(1)
    try:
        yield
    finally:
        local(previous)


@cache
def _blas_threads_setter() -> Callable[[int], int] | None:
    """OpenBLAS's `openblas_set_num_threads_local` (for the calling thread; it returns the
    previous count) from the library numpy ships with, if it has one."""
    libs = Path(np.__file__).resolve().parent.parent / "numpy.libs"
    for path in sorted(libs.glob("*openblas*")):
        try:
            setter = ctypes.CDLL(str(path)).openblas_set_num_threads_local
        except (OSError, AttributeError):
            continue
        setter.argtypes = [ctypes.c_int]
        setter.restype = ctypes.c_int
        return cast(Callable[[int], int], setter)
    return None
