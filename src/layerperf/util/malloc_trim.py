"""Handing freed memory back to the system between the sessions of a profile."""

from __future__ import annotations

import ctypes
import functools
import gc
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(None)  # the C library this process already runs on
    except (OSError, TypeError):  # TypeError: Windows takes no None
        return None
    trim: Callable[[int], int] | None = getattr(libc, "malloc_trim", None)  # glibc only
    return trim


def trim() -> None:
    """Return the C heap's free pages to the system (glibc's malloc_trim; nothing elsewhere).

    A big trace's reading frees its decoded chunks and arrays block by block, but glibc keeps the freed
    blocks in the heap (below its mmap threshold, which grows to 32 MiB): after the reading of a 10M-event
    PyTorch trace 166 of this process's 208 MiB were such pages, and a process forked then (the fold's
    helper) counted them again."""
    fn = _malloc_trim()
    if fn is not None:
        fn(0)


def release() -> None:
    """Collect Python's garbage, then return the C heap's free pages to the system (glibc's malloc_trim).

    A released ONNX Runtime session frees its weights, but glibc keeps freed blocks smaller than its
    mmap threshold (which grows to 32 MiB once larger blocks have been freed) in the heap: without
    this the process stays at the size of its largest session while the counting worker (another
    process) runs, and after the profile returns.
    """
    gc.collect()
    trim()
