"""CPU sets: parsed from and written as the kernel's list syntax (``0-3,6``), and a thread pinned to one.

A run pinned to a CPU set (``layerperf collect --cpus``, the co-runner of ``layerperf bench --corun``)
is a resource factor of its own: the threads a runtime starts inherit the affinity of the thread
that starts them, so pinning the calling thread before a session is built pins the session's pool.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator

from layerperf.errors import InputError


def parse_cpus(text: str) -> frozenset[int]:
    """``0-3,6`` -> {0, 1, 2, 3, 6}; InputError in one line for anything else, or an empty set."""
    cpus: set[int] = set()
    for part in text.replace(" ", "").split(","):
        first, dash, last = part.partition("-")
        if not first.isdigit() or (dash and not last.isdigit()):
            raise InputError(f"malformed CPU list '{text}'", hint="e.g. 0, 0-1 or 0,2-3")
        lo, hi = int(first), int(last) if dash else int(first)
        if hi < lo:
            raise InputError(f"malformed CPU list '{text}': {part} runs backwards")
        cpus.update(range(lo, hi + 1))
    return frozenset(cpus)


def format_cpus(cpus: Iterable[int]) -> str:
    """{0, 1, 2, 3, 6} -> ``0-3,6``: the kernel's own list syntax, ranges folded; "" for none."""
    ordered = sorted(set(cpus))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


def allowed_cpus() -> frozenset[int]:
    """The CPUs this thread may run on (every CPU where the platform cannot say)."""
    if hasattr(os, "sched_getaffinity"):
        return frozenset(os.sched_getaffinity(0))
    return frozenset(range(os.cpu_count() or 1))


def check_cpus(cpus: frozenset[int], what: str = "--cpus") -> frozenset[int]:
    """``cpus``, or one line naming those this process may not run on."""
    outside = cpus - allowed_cpus()
    if outside:
        raise InputError(f"{what} {format_cpus(cpus)}: CPU {format_cpus(outside)} is not among those this process "
                         f"may run on ({format_cpus(allowed_cpus())})")
    return cpus


@contextlib.contextmanager
def pinned(cpus: frozenset[int] | None) -> Iterator[None]:
    """The calling thread (and the threads it starts meanwhile) on ``cpus``, its affinity restored after;
    None or empty: left as it is."""
    if not cpus or not hasattr(os, "sched_setaffinity"):
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, check_cpus(cpus))
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)
