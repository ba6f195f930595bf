"""Derived metrics (IPC, miss rates, MPKI) from labelled counts."""

from __future__ import annotations

from collections.abc import Mapping

from layerperf.counters import abi
from layerperf.counters.catalog import EVENTS, EventSpec, resolve
from layerperf.errors import LayerperfError


def _key(name: str) -> tuple[int, int]:
    return EVENTS[name]


def _cache(cache_id: int, result: int) -> tuple[int, int]:
    return (abi.PERF_TYPE_HW_CACHE, abi.hw_cache_config(cache_id, abi.PERF_COUNT_HW_CACHE_OP_READ, result))


_MISS = abi.PERF_COUNT_HW_CACHE_RESULT_MISS
_ACCESS = abi.PERF_COUNT_HW_CACHE_RESULT_ACCESS
_CACHES = {
    "L1d": abi.PERF_COUNT_HW_CACHE_L1D,
    "L1i": abi.PERF_COUNT_HW_CACHE_L1I,
    "LLC": abi.PERF_COUNT_HW_CACHE_LL,
    "dTLB": abi.PERF_COUNT_HW_CACHE_DTLB,
    "iTLB": abi.PERF_COUNT_HW_CACHE_ITLB,
}

# metric -> (numerator, denominator, scale)
_RATIOS: dict[str, tuple[tuple[int, int], tuple[int, int], float]] = {
    "ipc": (_key("instructions"), _key("cycles"), 1.0),
    "cpi": (_key("cycles"), _key("instructions"), 1.0),
    "cache_miss_rate": (_key("cache-misses"), _key("cache-references"), 1.0),
    "cache_mpki": (_key("cache-misses"), _key("instructions"), 1000.0),
    "branch_miss_rate": (_key("branch-misses"), _key("branches"), 1.0),
    "branch_mpki": (_key("branch-misses"), _key("instructions"), 1000.0),
    "frontend_stall_ratio": (_key("stalled-cycles-frontend"), _key("cycles"), 1.0),
    "backend_stall_ratio": (_key("stalled-cycles-backend"), _key("cycles"), 1.0),
    **{
        f"{short}_load_miss_rate": (_cache(cid, _MISS), _cache(cid, _ACCESS), 1.0)
        for short, cid in _CACHES.items()
    },
    **{
        f"{short}_load_mpki": (_cache(cid, _MISS), _key("instructions"), 1000.0)
        for short, cid in _CACHES.items()
    },
}


METRICS = tuple(_RATIOS)  # the names of the derived metrics, columns of a layer table where they are known


def _identify(label: str, event: str | EventSpec) -> tuple[int, int] | None:
    if isinstance(event, EventSpec):
        return (event.type, event.config)
    try:
        spec = resolve(event)
    except LayerperfError:
        # An event we cannot resolve here (e.g. libpfm4 missing): trust a label that is a perf name.
        if label not in EVENTS:
            return None
        return EVENTS[label]
    return (spec.type, spec.config)


def derived_metrics(
    counts: Mapping[str, float], labels_to_events: Mapping[str, str | EventSpec]
) -> dict[str, float]:
    """IPC, CPI, miss rates and MPKI (misses per 1000 instructions) computable from `counts`.

    counts: {label: count}; labels_to_events: {label: event string or EventSpec}, which says what
    each label measured (any spelling: `cycles`, `perf::PERF_COUNT_HW_CPU_CYCLES`, ...). A metric is
    present only when both its inputs are and its denominator is positive.
    """
    by_key: dict[tuple[int, int], float] = {}
    for label, event in labels_to_events.items():
        key = _identify(label, event)
        if key is not None and label in counts and key not in by_key:
            by_key[key] = float(counts[label])
    out: dict[str, float] = {}
    for metric, (num, den, scale) in _RATIOS.items():
        if num in by_key and by_key.get(den, 0.0) > 0:
            out[metric] = by_key[num] * scale / by_key[den]
    return out
