"""What this machine can count right now (for `layerperf events`)."""

from __future__ import annotations

import threading
from typing import NamedTuple

from layerperf.counters import pfm
from layerperf.counters._open import close_all, exclusion_for, open_group
from layerperf.counters.catalog import known_names, resolve
from layerperf.counters.perms import Privilege, current_privilege
from layerperf.errors import LayerperfError


class ProbeResult(NamedTuple):
    """(name, ok, reason): reason is "" when the event opened, else the CounterError message."""

    name: str
    ok: bool
    reason: str


def probe_event(name: str, privilege: Privilege | None = None) -> ProbeResult:
    """Try to open one event on the calling thread (user mode, kernel mode only where it must)."""
    priv = privilege if privilege is not None else current_privilege()
    try:
        spec = resolve(name)
        excl = exclusion_for(spec, None, priv)
        fds = open_group(threading.get_native_id(), [spec], [excl], priv)
    except LayerperfError as exc:
        return ProbeResult(name, False, exc.message)
    except OSError as exc:  # ESRCH cannot happen for the calling thread; anything else is unexpected
        return ProbeResult(name, False, str(exc))
    close_all(fds)
    return ProbeResult(name, True, "")


def probe_events(names: list[str] | None = None) -> list[ProbeResult]:
    """Probe every perf event name this module knows (canonical names, no aliases) or `names`."""
    priv = current_privilege()
    return [probe_event(n, priv) for n in (names if names is not None else known_names(aliases=False))]


def pfm_event_list() -> list[pfm.PfmEvent]:
    """libpfm4's events for the PMUs it detects here (MissingDependency without libpfm4)."""
    return pfm.event_list()


def pfm_available() -> bool:
    """Whether libpfm4 is installed."""
    return pfm.available()
