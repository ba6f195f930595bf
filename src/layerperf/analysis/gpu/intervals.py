"""Interval arithmetic over device activities, and their kinds (shared by the GPU views)."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from layerperf.data.calls import KernelTable

COMMUNICATION, MEMORY, COMPUTATION, OTHER = "communication", "memory", "computation", "other"
KINDS = (COMPUTATION, MEMORY, COMMUNICATION, OTHER)
_COMM = re.compile(r"^nccl.*Kernel")
_MEMORY = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")
_NOT_COMPUTE = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")


def kind_of(name: str) -> str:
    """A kernel's kind by its name (Holistic Trace Analysis's rules, so that figures compare)."""
    if _COMM.match(name):
        return COMMUNICATION
    if _MEMORY.match(name):
        return MEMORY
    return OTHER if _NOT_COMPUTE.match(name) else COMPUTATION


def kinds(kernels: KernelTable) -> np.ndarray:
    """The kind of every activity (object array of the :data:`KINDS` strings)."""
    per_name = np.asarray([kind_of(n) for n in kernels.name.values], dtype=object)
    return per_name[kernels.name.codes] if len(kernels) else np.zeros(0, dtype=object)


def merged(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals as disjoint sorted intervals (starts, ends)."""
    if not start.size:
        return start, end
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    new = np.ones(s.size, dtype=bool)
    new[1:] = s[1:] > reach[:-1]  # touching intervals merge, as HTA merges them
    first = np.flatnonzero(new)
    last = np.append(first[1:], s.size) - 1
    return s[first], reach[last]


def union_ns(start: np.ndarray, end: np.ndarray) -> float:
    s, e = merged(start, end)
    return float((e - s).sum())


def intersection_ns(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> float:
    """Length of the overlap of two unions of disjoint sorted intervals."""
    (sa, ea), (sb, eb) = a, b
    total, i, j = 0.0, 0, 0
    while i < sa.size and j < sb.size:
        lo, hi = max(sa[i], sb[j]), min(ea[i], eb[j])
        if hi > lo:
            total += float(hi - lo)
        if ea[i] < eb[j]:
            i += 1
        else:
            j += 1
    return total


def windows_of(rows_ts: np.ndarray, windows: Sequence[tuple[float, float]]) -> list[np.ndarray]:
    """For each (start, end) window, the indices of the rows whose time lies in it."""
    return [np.flatnonzero((rows_ts >= s) & (rows_ts < e)) for s, e in windows]


def step_time(kernels: KernelTable) -> np.ndarray:
    """When an activity belongs to a step: when it was launched (known), else when it started."""
    return np.where(np.isnan(kernels.launch_ts_ns), kernels.ts_ns, kernels.launch_ts_ns)
