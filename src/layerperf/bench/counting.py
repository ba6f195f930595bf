"""Perf counters per call of the op, for ``--events``.

Counted in passes of their own after the timed samples (the same number of samples of the same
number of calls), so reading counters never lands inside a timing; events that do not fit one PMU
group together are split into several passes by :func:`layerperf.counters.schedule`.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

from layerperf.counters import CounterSet, derived_metrics, schedule


def count_per_call(call: Callable[[], object], loops: int, samples: int, events: Sequence[str]) -> dict[str, float]:
    """Median count per call of each event over ``samples`` batches of ``loops`` calls."""

    out: dict[str, float] = {}
    for specs in schedule(list(events)):
        if not specs:
            continue
        per_call: dict[str, list[float]] = {s.name: [] for s in specs}
        with CounterSet(specs) as cs:
            cs.enable()
            for _ in range(samples):
                before = cs.read()
                for _ in range(loops):
                    call()
                for name, value in (cs.read() - before).scaled().items():
                    per_call[name].append(value / loops)
        out.update({name: statistics.median(values) for name, values in per_call.items()})
    return out


def counter_metrics(counters: dict[str, float]) -> dict[str, float]:
    """IPC, miss rates and the like where the counted events allow them."""
    if not counters:
        return {}

    return derived_metrics(counters, {name: name for name in counters})
