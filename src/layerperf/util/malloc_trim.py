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
    except OSError:
        return None
    trim: Callable[[int], int] | None = getattr(libc, "malloc_trim", None)  # glibc only
    return trim


def release() -> None:
    """Collect Python's garbage, then return the C heap's free pages to the system (glibc's malloc_trim).

    A released ONNX Runtime session frees its weights, but glibc keeps freed blocks smaller than its
    mmap threshold (which grows to 32 MiB once larger blocks have been freed) in the heap: without
    this the process stays at the size of its largest session while the counting worker (another
    process) runs, and after the profile returns.
    """
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
