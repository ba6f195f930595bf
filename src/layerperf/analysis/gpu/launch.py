"""What launching kernels cost: each launch's CPU time and delay, and the kernels each op launches.

For an activity whose launching runtime call is known (its ``correlation``): the *CPU launch time* is
that call's duration; the *launch delay* the time from the call's end to the activity's start (0 when
the activity started before the call returned), as Holistic Trace Analysis computes it. Per kernel
name: calls, mean CPU launch time, total, mean, median and largest launch delay, the largest total
first. Per op that launched
anything: its calls' kernel sequences (the kernels one call launched, in start order), the most
frequent first.

Two folds. The per-name figures read the activities in any order into two
:class:`~layerperf.analysis.gpu.accumulate.Stats` keyed by name (the delays with a median sketch):
memory per distinct kernel name. The sequences read them by op call then start
(``blocks("owner", "ts_ns")``), carrying the call in progress (its key, kernels so far, launcher)
into the next block; ``owner`` is an opaque key per op call (-1: none). Memory: the open call's
kernels, and a count per distinct (op, sequence).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from layerperf.analysis.gpu.accumulate import Stats, runs
from layerperf.analysis.gpu.source import Activities, activities
from layerperf.data.calls import KernelTable


@dataclass(frozen=True, slots=True)
class LaunchStats:
    """One kernel name's launches (ns)."""

    name: str
    launches: int
    cpu_mean_ns: float
    delay_total_ns: float  # what the rows are ranked by
    delay_mean_ns: float
    delay_median_ns: float
    delay_max_ns: float


@dataclass(frozen=True, slots=True)
class OpSequence:
    """One op's kernel sequence and how many of its calls launched exactly it."""

    op: str
    calls: int
    sequence: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Launch:
    kernels: tuple[LaunchStats, ...]
    sequences: tuple[OpSequence, ...]
    launches: int  # activities whose launching call is known
    cpu_ns: float  # their summed CPU launch time
    delay_ns: float  # their summed launch delay


def delays(kernels: KernelTable) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Of one block: (rows with a known launch, their CPU launch time, their launch delay), ns."""
    rows = np.flatnonzero(~np.isnan(kernels.launch_ts_ns))
    cpu = kernels.launch_dur_ns[rows]
    delay = np.clip(kernels.ts_ns[rows] - kernels.launch_ts_ns[rows] - cpu, 0, None)
    return rows, cpu, delay


def launch(kernels: KernelTable | Activities) -> Launch:
    src = activities(kernels)
    cpu, delay = Stats(), Stats(medians=True)
    names: tuple[str, ...] = ()
    for block in src.blocks():
        rows, cpu_ns, delay_ns = delays(block)
        codes = block.name.codes[rows].astype(np.int64)
        cpu.add(codes, cpu_ns)
        delay.add(codes, delay_ns)
        names = block.name.values
    stats = []
    for code in np.flatnonzero(delay.count).tolist():
        n = int(delay.count[code])
        total = float(delay.total[code])
        stats.append(LaunchStats(names[code], n, float(cpu.total[code]) / n, total, total / n,
                                 delay.median(code), float(delay.most[code])))
    stats.sort(key=lambda s: -s.delay_total_ns)
    return Launch(tuple(stats), sequences(src), int(delay.count.sum()), float(cpu.total.sum()),
                  float(delay.total.sum()))


def _calls(src: Activities, tables: list[KernelTable]) -> Iterator[tuple[int, tuple[int, ...]]]:
    """Each op call that launched anything: (its launcher's code, its kernels' name codes by start);
    ``tables`` gets a block, whose string tables name the codes."""
    current: tuple[int, list[int], int] | None = None  # the open call: owner, kernels, launcher
    for block in src.blocks("owner", "ts_ns"):
        if not len(block):
            continue
        tables[:] = [block]
        owner, name, launcher = block.owner, block.name.codes, block.launcher.codes
        for lo, hi in runs(owner):
            call = int(owner[lo])
            if call < 0:
                continue
            if current is not None and current[0] != call:
                yield current[2], tuple(current[1])
                current = None
            kernels = current[1] if current is not None else []
            kernels.extend(name[lo:hi].tolist())
            current = (call, kernels, int(launcher[hi - 1]))  # the op of the call's last kernel names it
    if current is not None:
        yield current[2], tuple(current[1])


def sequences(kernels: KernelTable | Activities) -> tuple[OpSequence, ...]:
    """Per launching op name, each distinct kernel sequence of its calls, most frequent first."""
    counts: dict[int, Counter[tuple[int, ...]]] = {}
    tables: list[KernelTable] = []
    for op, seq in _calls(activities(kernels), tables):
        counts.setdefault(op, Counter())[seq] += 1
    if not counts:
        return ()
    names, ops = tables[0].name.values, tables[0].launcher.values
    out = [OpSequence(ops[op], n, tuple(names[k] for k in seq)) for op, c in counts.items()
           for seq, n in c.most_common()]
    return tuple(sorted(out, key=lambda s: (-s.calls, s.op)))
