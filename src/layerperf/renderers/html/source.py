"""What a report is made of: a trace's event table, and the Profile behind it when layerperf wrote it.

Every trace ``layerperf analyze`` reads becomes a :class:`Source`: its :class:`~layerperf.data.calls.Calls`
(the event table every reader produces), and for a layerperf trace.json (or a Profile in hand) the
Profile too, which adds what only it has: latency with the profiler off, counters, memory, the machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from layerperf.data.calls import Calls
from layerperf.data.profile import Profile
from layerperf.readers.detect import read_table, resolve
from layerperf.readers.layerperf import load_profile

if TYPE_CHECKING:
    pass


@dataclass(frozen=True, slots=True)
class Source:
    """One trace to report on: its calls, its Profile when it has one, and a label naming it."""

    calls: Calls
    profile: Profile | None
    label: str

    @property
    def format(self) -> str:
        return str(self.calls.meta.get("format") or "trace")


def model_name(profile: Profile) -> str:
    return profile.metadata.model.name


def from_profile(profile: Profile, label: str | None = None) -> Source:
    return Source(profile.calls(), profile, label or model_name(profile))


def load(path: str | Path) -> Source:
    """The trace at ``path`` (any format ``layerperf analyze`` reads; a profile directory stands for its
    trace.json). Unreadable input raises InputError."""

    trace = resolve(Path(path))
    calls = read_table(trace)
    if calls.meta.get("format") == "layerperf":
        # the trace is read a second time, as a Profile: small beside the foreign traces of millions of events
        profile = load_profile(trace)
        return Source(calls, profile, model_name(profile))
    return Source(calls, None, trace.name)


def of(subject: Any) -> Source:
    """A Source from a Profile, a Calls table, a path, or a Source."""

    if isinstance(subject, Source):
        return subject
    if isinstance(subject, Profile):
        return from_profile(subject)
    if isinstance(subject, Calls):
        return Source(subject, None, Path(str(subject.meta.get("source") or "trace")).name)
    if isinstance(subject, str | Path):
        return load(subject)
    raise TypeError(f"cannot report on a {type(subject).__name__}: give a Profile, a Calls table or a trace path")
