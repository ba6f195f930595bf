"""Splitting events into passes whose groups the PMU can count exactly (no multiplexing)."""

from __future__ import annotations

import os
import struct
import threading
import time
from collections.abc import Callable, Sequence

from layerperf.counters import abi, pfm
from layerperf.counters._open import HEADER_WORDS, USER_ONLY, GroupTooBig, close_all, open_group
from layerperf.counters.catalog import EventSpec, resolve
from layerperf.counters.perms import current_privilege, require_user
from layerperf.errors import CounterError, MissingDependency

DEFAULT_COUNTERS = 4  # general-purpose counters on most x86 cores with SMT on (Intel), 6 on AMD Zen
_PROBE_SPIN_S = 0.002

Fits = Callable[[Sequence[EventSpec]], bool]


def counter_budget() -> int:
    """General-purpose counters of this CPU's core PMU as libpfm4 knows it, else DEFAULT_COUNTERS."""

    try:
        budget = pfm.core_counter_budget()
    except MissingDependency:
        budget = None
    return budget or DEFAULT_COUNTERS


def group_fits(specs: Sequence[EventSpec]) -> bool:
    """Whether `specs` can be counted together right now, probed on the calling thread.

    The kernel refuses a group that cannot fit the PMU at all (EINVAL when adding the member that
    overflows it). A group that fits on paper but not beside counters other users pinned (e.g. the
    NMI watchdog) opens fine and then never runs: time_running stays 0 while time_enabled grows.
    Other errors (unsupported event, permissions) are raised as CounterError.
    """
    priv = current_privilege()
    require_user(priv)
    try:
        fds = open_group(threading.get_native_id(), specs, [USER_ONLY] * len(specs), priv)
    except GroupTooBig:
        return False
    try:
        abi.ioctl_enable(fds[0])
        deadline = time.perf_counter() + _PROBE_SPIN_S
        while time.perf_counter() < deadline:
            pass
        abi.ioctl_disable(fds[0])
        data = os.read(fds[0], (HEADER_WORDS + len(specs)) * 8)
    finally:
        close_all(fds)
    _, enabled, running = struct.unpack_from("=3Q", data)
    return not (enabled > 0 and running == 0)


def _split_until_fits(chunk: list[EventSpec], fits: Fits) -> list[list[EventSpec]]:
    if fits(chunk):
        return [chunk]
    if len(chunk) == 1:
        raise CounterError(
            f"{chunk[0].name} cannot be scheduled on the PMU even alone",
            "another user may hold the counters (e.g. the NMI watchdog: sysctl -w kernel.nmi_watchdog=0)",
        )
    half = len(chunk) // 2
    return _split_until_fits(chunk[:half], fits) + _split_until_fits(chunk[half:], fits)


def schedule(
    specs: Sequence[EventSpec | str], max_per_group: int | None = None, *, fits: Fits | None = None
) -> list[list[EventSpec]]:
    """Split events into passes, each one group the PMU counts exactly, for one run apiece.

    Hardware events are packed max_per_group at a time (default: counter_budget()); each pack is
    probed with `fits` (default group_fits) and halved until it fits. Software events use no PMU
    counter and ride along in the first pass. Returns at least one pass; an empty input gives [[]].
    """
    resolved = [resolve(s) if isinstance(s, str) else s for s in specs]
    budget = max_per_group if max_per_group is not None else counter_budget()
    if budget < 1:
        raise CounterError(f"max_per_group must be at least 1, not {budget}")
    probe = fits if fits is not None else group_fits
    hardware = [s for s in resolved if s.uses_pmu_counter]
    software = [s for s in resolved if not s.uses_pmu_counter]
    passes: list[list[EventSpec]] = []
    for start in range(0, len(hardware), budget):
        passes.extend(_split_until_fits(hardware[start : start + budget], probe))
    if not passes:
        passes.append([])
    passes[0].extend(software)
    return passes
