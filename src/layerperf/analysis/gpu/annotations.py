"""User annotations (``record_function`` ranges, ``ProfilerStep#N``): their CPU and GPU time.

Per annotation name: how often it was recorded on the CPU and the time those ranges took, the same for
its device-side copies (``gpu_user_annotation``), and the device time of the activities launched inside
its CPU ranges — by a runtime call on the range's own thread (same process and thread id), started
within the range; a ``ProfilerStep#N`` range, the step itself, takes what every thread launched in it (a
training step's backward kernels are launched from autograd's threads), as the temporal view's steps do.

A range nested in a range of the same name on the same thread (or stream) is counted once, in the
outermost: its time, and what was launched inside it, are already the outer range's (as the op table's
inclusive figures count an op nested in an op of its own group once). Nested means starting inside the
other and ending by its end, give or take the 1 µs the op table allows a trace's rounding
(:data:`~layerperf.data.nesting.EXACT_REACH_NS`). The call counts are of every range, nested or not.

The annotations are few and stay in memory; the activities pass by launching thread, then launch time
(``blocks("launch_thread", "launch_ts_ns")``), and for each boundary t of the outermost CPU ranges on
a thread the fold keeps the device time of the activities that thread launched before t (a running sum
per boundary, added to block by block). A range's launched time is the difference at its two ends.
Memory: one number per boundary.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from layerperf.analysis.gpu.source import Activities, activities
from layerperf.data.calls import Annotations, KernelTable
from layerperf.data.nesting import EXACT_REACH_NS, enclosing
from layerperf.readers.kineto_collect import STEP_PREFIX


@dataclass(frozen=True, slots=True)
class AnnotationTime:
    name: str
    cpu_calls: int  # every CPU range
    cpu_ns: float  # the outermost ranges' time (see the module's docstring)
    gpu_calls: int  # every device-side range
    gpu_ns: float  # the outermost ones' time
    launched_device_ns: float | None  # inside the outermost CPU ranges; None: no kernel table, or no launch times


ANY_THREAD = np.iinfo(np.int64).min  # the thread key of a step's boundaries: what every thread launched counts


def launched_before(kernels: KernelTable | Activities, thread: np.ndarray,
                    bounds: np.ndarray) -> tuple[np.ndarray, int]:
    """For each time ``bounds`` on a thread (``thread``: keys as ``KernelTable.launch_thread``, or
    :data:`ANY_THREAD`; the pairs sorted by thread, then time): the device time of the activities that
    thread (any thread) launched before it; and how many activities have a known launch."""
    before, known = np.zeros(bounds.size), 0
    threads, first = np.unique(thread, return_index=True)
    last = np.append(first[1:], thread.size)
    anywhere = (int(first[0]), int(last[0])) if threads.size and threads[0] == ANY_THREAD else None
    for block in activities(kernels).blocks("launch_thread", "launch_ts_ns"):
        ok = ~np.isnan(block.launch_ts_ns)
        known += int(ok.sum())
        if not ok.any() or not threads.size:
            continue
        ts, dur, who = block.launch_ts_ns[ok], block.dur_ns[ok], block.launch_thread[ok]
        cut = np.flatnonzero(np.diff(who)) + 1  # runs of one thread, each sorted by launch time
        for lo, hi in zip(np.concatenate([[0], cut]).tolist(), np.append(cut, who.size).tolist(), strict=True):
            k = int(np.searchsorted(threads, who[lo]))
            mine = k < threads.size and threads[k] == who[lo]  # else a thread without annotations
            if not mine and anywhere is None:
                continue
            cum = np.concatenate([[0.0], np.cumsum(dur[lo:hi])])
            for a, b in ([(int(first[k]), int(last[k]))] if mine else []) + ([anywhere] if anywhere else []):
                before[a:b] += cum[np.searchsorted(ts[lo:hi], bounds[a:b], side="left")]
    return before, known


def outermost(notes: Annotations) -> np.ndarray:
    """Per range: whether it lies inside no other range of its name, side (CPU or GPU) and thread."""
    n = len(notes)
    if not n:
        return np.zeros(0, dtype=bool)
    keys = np.stack([notes.name.codes.astype(np.int64), notes.gpu.astype(np.int64), notes.thread])
    _, group = np.unique(keys, axis=1, return_inverse=True)
    parent = enclosing(group.reshape(-1).astype(np.int64), notes.ts_ns, notes.dur_ns, zero_first=False,
                       reach=EXACT_REACH_NS)
    return parent < 0


def annotation_times(notes: Annotations, kernels: KernelTable | Activities | None) -> tuple[AnnotationTime, ...]:
    n_names = len(notes.name.values)
    codes = notes.name.codes.astype(np.int64)
    cpu_rows, gpu_rows = ~notes.gpu, notes.gpu
    outer = outermost(notes)

    def per_name(rows: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        return np.bincount(codes[rows], weights=None if weights is None else weights[rows], minlength=n_names)

    launched = None
    if kernels is not None:
        counted = np.flatnonzero(cpu_rows & outer)
        start, end = notes.ts_ns[counted], notes.ts_ns[counted] + notes.dur_ns[counted]
        step = np.asarray([notes.name.values[c].startswith(STEP_PREFIX) for c in range(n_names)], dtype=bool)
        own = np.where(step[codes[counted]], ANY_THREAD, notes.thread[counted])
        thread = np.concatenate([own, own])
        # each thread's boundaries, sorted by thread then time: the ranges' two ends (``at``) among them
        order = np.lexsort((np.concatenate([start, end]), thread))
        times = np.concatenate([start, end])[order]
        new = np.ones(order.size, dtype=bool)
        new[1:] = (thread[order][1:] != thread[order][:-1]) | (times[1:] != times[:-1])
        at = np.empty(order.size, dtype=np.int64)
        at[order] = np.cumsum(new) - 1
        before, known = launched_before(kernels, thread[order][new], times[new])
        if known:
            lo, hi = at[:counted.size], at[counted.size:]
            launched = np.bincount(codes[counted], weights=before[hi] - before[lo], minlength=n_names)
    cpu_calls, gpu_calls = per_name(cpu_rows), per_name(gpu_rows)
    cpu_ns, gpu_ns = per_name(cpu_rows & outer, notes.dur_ns), per_name(gpu_rows & outer, notes.dur_ns)
    present, first = np.unique(codes, return_index=True)
    out = [AnnotationTime(notes.name.values[c], int(cpu_calls[c]), float(cpu_ns[c]), int(gpu_calls[c]),
                          float(gpu_ns[c]), None if launched is None else float(launched[c]))
           for c in present[np.argsort(first, kind="stable")].tolist()]  # in the order the names first come
    return tuple(sorted(out, key=lambda a: -(a.cpu_ns + a.gpu_ns)))

