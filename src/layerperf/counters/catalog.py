"""Event names: perf(1)'s generic names, raw `rNNNN` codes, and libpfm4 strings, resolved to attr values."""

from __future__ import annotations

import difflib
import functools
import re

from layerperf.counters import abi, pfm
from layerperf.counters.event import EventSpec
from layerperf.errors import CounterError, LayerperfError, MissingDependency

# Software events that the kernel raises only from kernel context (the scheduler), so with
# exclude_kernel=1 they always read 0: counting them needs kernel mode.
_KERNEL_ONLY = frozenset({"context-switches", "cpu-migrations", "cgroup-switches"})

_HARDWARE: dict[str, int] = {
    "cycles": abi.PERF_COUNT_HW_CPU_CYCLES,
    "instructions": abi.PERF_COUNT_HW_INSTRUCTIONS,
    "cache-references": abi.PERF_COUNT_HW_CACHE_REFERENCES,
    "cache-misses": abi.PERF_COUNT_HW_CACHE_MISSES,
    "branches": abi.PERF_COUNT_HW_BRANCH_INSTRUCTIONS,
    "branch-misses": abi.PERF_COUNT_HW_BRANCH_MISSES,
    "bus-cycles": abi.PERF_COUNT_HW_BUS_CYCLES,
    "stalled-cycles-frontend": abi.PERF_COUNT_HW_STALLED_CYCLES_FRONTEND,
    "stalled-cycles-backend": abi.PERF_COUNT_HW_STALLED_CYCLES_BACKEND,
    "ref-cycles": abi.PERF_COUNT_HW_REF_CPU_CYCLES,
}

_SOFTWARE: dict[str, int] = {
    "cpu-clock": abi.PERF_COUNT_SW_CPU_CLOCK,
    "task-clock": abi.PERF_COUNT_SW_TASK_CLOCK,
    "page-faults": abi.PERF_COUNT_SW_PAGE_FAULTS,
    "context-switches": abi.PERF_COUNT_SW_CONTEXT_SWITCHES,
    "cpu-migrations": abi.PERF_COUNT_SW_CPU_MIGRATIONS,
    "minor-faults": abi.PERF_COUNT_SW_PAGE_FAULTS_MIN,
    "major-faults": abi.PERF_COUNT_SW_PAGE_FAULTS_MAJ,
    "alignment-faults": abi.PERF_COUNT_SW_ALIGNMENT_FAULTS,
    "emulation-faults": abi.PERF_COUNT_SW_EMULATION_FAULTS,
    "cgroup-switches": abi.PERF_COUNT_SW_CGROUP_SWITCHES,
}

# perf's legacy cache names: <cache>-<ops> for accesses, <cache>-<op>-misses for misses.
_CACHES = {
    "L1-dcache": abi.PERF_COUNT_HW_CACHE_L1D,
    "L1-icache": abi.PERF_COUNT_HW_CACHE_L1I,
    "LLC": abi.PERF_COUNT_HW_CACHE_LL,
    "dTLB": abi.PERF_COUNT_HW_CACHE_DTLB,
    "iTLB": abi.PERF_COUNT_HW_CACHE_ITLB,
    "branch": abi.PERF_COUNT_HW_CACHE_BPU,
    "node": abi.PERF_COUNT_HW_CACHE_NODE,
}
# op -> (plural used for accesses, op id)
_CACHE_OPS = {
    "load": ("loads", abi.PERF_COUNT_HW_CACHE_OP_READ),
    "store": ("stores", abi.PERF_COUNT_HW_CACHE_OP_WRITE),
    "prefetch": ("prefetches", abi.PERF_COUNT_HW_CACHE_OP_PREFETCH),
}

ALIASES: dict[str, str] = {
    "cpu-cycles": "cycles",
    "branch-instructions": "branches",
    "idle-cycles-frontend": "stalled-cycles-frontend",
    "idle-cycles-backend": "stalled-cycles-backend",
    "faults": "page-faults",
    "cs": "context-switches",
    "migrations": "cpu-migrations",
}


def _cache_table() -> dict[str, int]:
    table = {}
    for cache, cache_id in _CACHES.items():
        for op, (plural, op_id) in _CACHE_OPS.items():
            access = abi.PERF_COUNT_HW_CACHE_RESULT_ACCESS
            miss = abi.PERF_COUNT_HW_CACHE_RESULT_MISS
            table[f"{cache}-{plural}"] = abi.hw_cache_config(cache_id, op_id, access)
            table[f"{cache}-{op}-misses"] = abi.hw_cache_config(cache_id, op_id, miss)
    return table


_CACHE_EVENTS = _cache_table()

# canonical name -> (type, config)
EVENTS: dict[str, tuple[int, int]] = {
    **{n: (abi.PERF_TYPE_HARDWARE, c) for n, c in _HARDWARE.items()},
    **{n: (abi.PERF_TYPE_HW_CACHE, c) for n, c in _CACHE_EVENTS.items()},
    **{n: (abi.PERF_TYPE_SOFTWARE, c) for n, c in _SOFTWARE.items()},
}
_BY_LOWER = {n.lower(): n for n in [*EVENTS, *ALIASES]}
_RAW = re.compile(r"r([0-9a-fA-F]{1,16})")  # a raw code is the 64-bit attr.config
_MODIFIERS = re.compile(r"[uk]{1,2}")


def known_names(*, aliases: bool = True) -> list[str]:
    """The perf event names this module knows (canonical first, then aliases)."""
    return [*EVENTS, *ALIASES] if aliases else list(EVENTS)


def _split_modifiers(name: str) -> tuple[str, str]:
    base, sep, mod = name.rpartition(":")
    if sep and _MODIFIERS.fullmatch(mod) and len(set(mod)) == len(mod):
        return base, mod
    return name, ""


def _perf_name(name: str) -> EventSpec | None:
    base, mod = _split_modifiers(name)
    canonical = _BY_LOWER.get(base.lower())
    if canonical is not None:
        canonical = ALIASES.get(canonical, canonical)
        type_, config = EVENTS[canonical]
        return EventSpec(name, type_, config, kernel_only=canonical in _KERNEL_ONLY, modifiers=mod)
    raw = _RAW.fullmatch(base)
    if raw is not None:
        return EventSpec(name, abi.PERF_TYPE_RAW, int(raw.group(1), 16), modifiers=mod)
    return None


def _unknown(name: str, extra_hint: str = "") -> CounterError:
    close = difflib.get_close_matches(name.lower(), list(_BY_LOWER), n=3, cutoff=0.6)
    hint = (
        "did you mean " + ", ".join(_BY_LOWER[c] for c in close) + "?"
        if close
        else "`layerperf events` lists the events of this machine"
    )
    return CounterError(f"unknown perf event {name!r}", hint + extra_hint)


def resolve(name: str) -> EventSpec:
    """Resolve an event string to an EventSpec.

    perf's generic names (`cycles`, `L1-dcache-load-misses`, `task-clock`, with optional `:u`/`:k`)
    and raw `rNNNN` codes are resolved here; strings with `::` or other names go to libpfm4.
    Raises CounterError for unknown names (with the closest known names), MissingDependency when a
    libpfm4 string is used without libpfm4 installed.
    """
    name = name.strip()
    if not name:
        raise CounterError("empty perf event name")
    if "::" not in name:
        spec = _perf_name(name)
        if spec is not None:
            return spec
    try:
        return pfm.resolve(name)
    except MissingDependency:
        if "::" in name:
            raise
        raise _unknown(name, " (libpfm4 is not installed, so PMU-specific names are unavailable)") from None
    except pfm.PfmNotFound as exc:
        if "::" in name:
            raise CounterError(exc.message, _pfm_hint(name)) from None
        raise _unknown(name) from None


def _pfm_hint(name: str) -> str:
    names = [e.name for e in pfm.event_list()]
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    if close:
        return "did you mean " + ", ".join(close) + "?"
    return "`layerperf events` lists the libpfm4 events of this machine"


@functools.lru_cache(maxsize=256)
def event_kind(event: str) -> tuple[int, int] | None:
    """The (type, config) an event string counts, in any spelling this machine resolves (``task-clock``,
    ``TASK-CLOCK``, ``task-clock:u``, ``perf::PERF_COUNT_SW_TASK_CLOCK``); None where it resolves to nothing
    here (a label whose event is not known, a libpfm4 string without libpfm4). Only a ``::`` string goes to
    libpfm4 (a label such as ``ipc`` or ``tc`` costs no library load), and no close names are looked for."""
    name = event.strip()
    if "::" not in name:
        spec = _perf_name(name)
        return None if spec is None else (spec.type, spec.config)
    try:
        spec = pfm.resolve(name)
    except (LayerperfError, pfm.PfmNotFound, UnicodeError, ValueError, OSError):  # a label read from a file
        return None
    return spec.type, spec.config


def counts_ns(event: str) -> bool:
    """Whether ``event`` is one of perf's software clocks (task-clock, cpu-clock): a count of nanoseconds."""
    return event_kind(event) in _CLOCKS


def is_software(event: str) -> bool:
    """Whether ``event`` is a software event: the kernel's bookkeeping (clocks, faults, switches)."""
    kind = event_kind(event)
    return kind is not None and kind[0] == abi.PERF_TYPE_SOFTWARE


_CLOCKS = {(abi.PERF_TYPE_SOFTWARE, abi.PERF_COUNT_SW_TASK_CLOCK),
           (abi.PERF_TYPE_SOFTWARE, abi.PERF_COUNT_SW_CPU_CLOCK)}
