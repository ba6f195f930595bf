"""What launching kernels cost: each launch's CPU time and delay, and the kernels each op launches.

For an activity whose launching runtime call is known (its ``correlation``): the *CPU launch time* is
that call's duration; the *launch delay* the time from the call's end to the activity's start (0 when
the activity started before the call returned), as Holistic Trace Analysis computes it. Per kernel
name: calls, mean CPU launch time, mean, median and largest launch delay. Per op that launched
anything: its calls' kernel sequences (the kernels one call launched, in start order), the most
frequent first.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from layerperf.data.calls import KernelTable


@dataclass(frozen=True, slots=True)
class LaunchStats:
    """One kernel name's launches (ns)."""

    name: str
    launches: int
    cpu_mean_ns: float
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
    """(rows with a known launch, their CPU launch time, their launch delay), ns."""
    rows = np.flatnonzero(~np.isnan(kernels.launch_ts_ns))
    cpu = kernels.launch_dur_ns[rows]
    delay = np.clip(kernels.ts_ns[rows] - kernels.launch_ts_ns[rows] - cpu, 0, None)
    return rows, cpu, delay


def launch(kernels: KernelTable) -> Launch:
    rows, cpu, delay = delays(kernels)
    codes = kernels.name.codes[rows]
    stats = []
    for code in np.unique(codes).tolist():
        mine = codes == code
        d = delay[mine]
        stats.append(LaunchStats(kernels.name.values[code], int(mine.sum()), float(cpu[mine].mean()),
                                 float(d.mean()), float(np.median(d)), float(d.max())))
    stats.sort(key=lambda s: -s.delay_mean_ns * s.launches)
    return Launch(tuple(stats), sequences(kernels), int(rows.size), float(cpu.sum()), float(delay.sum()))


def sequences(kernels: KernelTable) -> tuple[OpSequence, ...]:
    """Per launching op name, each distinct kernel sequence of its calls, most frequent first."""
    owned = np.flatnonzero(kernels.owner >= 0)
    owned = owned[np.lexsort((kernels.ts_ns[owned], kernels.owner[owned]))]
    names, launchers = kernels.name.tolist(), kernels.launcher.tolist()
    per_call: dict[int, list[str]] = {}
    op_of: dict[int, str] = {}
    for i in owned.tolist():
        call = int(kernels.owner[i])
        per_call.setdefault(call, []).append(names[i])
        op_of[call] = launchers[i]
    counts: dict[str, Counter[tuple[str, ...]]] = {}
    for call, seq in per_call.items():
        counts.setdefault(op_of[call], Counter())[tuple(seq)] += 1
    out = [OpSequence(op, n, seq) for op, c in counts.items() for seq, n in c.most_common()]
    return tuple(sorted(out, key=lambda s: (-s.calls, s.op)))
