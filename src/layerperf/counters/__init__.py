"""Linux perf counters from Python: perf_event_open through ctypes, one group per thread.

    from layerperf.counters import CounterSet, schedule

    for events in schedule(["cycles", "instructions", "page-faults"]):
        with CounterSet(events) as cs:
            cs.enable()
            before = cs.read()
            run()
            delta = cs.read() - before      # Reading: per-event counts summed over threads

Event names: perf's generic names (resolve), raw `rNNNN`, libpfm4 strings (`pmu::EVENT:UMASK`).
"""

from __future__ import annotations

from layerperf.counters.catalog import known_names, resolve
from layerperf.counters.config import parse_perf_config
from layerperf.counters.event import EventSpec
from layerperf.counters.group import CounterSet, list_threads
from layerperf.counters.metrics import derived_metrics
from layerperf.counters.perms import Privilege, current_privilege
from layerperf.counters.probe import ProbeResult, pfm_available, pfm_event_list, probe_events
from layerperf.counters.reading import Reading
from layerperf.counters.schedule import counter_budget, group_fits, schedule

__all__ = [
    "CounterSet",
    "EventSpec",
    "Privilege",
    "ProbeResult",
    "Reading",
    "counter_budget",
    "current_privilege",
    "derived_metrics",
    "group_fits",
    "known_names",
    "list_threads",
    "parse_perf_config",
    "pfm_available",
    "pfm_event_list",
    "probe_events",
    "resolve",
    "schedule",
]
