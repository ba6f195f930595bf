"""What a report is made of: a trace's event table, and the Profile behind it when layerperf wrote it.

Every trace ``layerperf analyze`` reads becomes a :class:`Source`: its :class:`~layerperf.data.calls.Calls`
(the event table every reader produces), and for a layerperf trace.json (or a Profile in hand) the
Profile too, which adds what only it has: latency with the profiler off, counters, memory, the machine.
A foreign trace larger than :data:`~layerperf.renderers.html.streamed.WHOLE_BYTES` is read streamed
(:mod:`.streamed`): its table folded, its calls only those of the runs the page draws, and a digest of
the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from layerperf.data.calls import Calls
from layerperf.data.fold import Folded
from layerperf.data.profile import Profile
from layerperf.readers.detect import read_table, release, resolve
from layerperf.readers.layerperf import load_profile
from layerperf.renderers.html import streamed
from layerperf.renderers.html.runs import RunSet, run_set
from layerperf.renderers.html.streamed import Digest

if TYPE_CHECKING:
    pass


@dataclass(frozen=True, slots=True)
class Source:
    """One trace to report on: its calls, its Profile when it has one, and a label naming it; a trace
    read streamed has its ``folded`` table and ``digest``, and ``calls`` holds only the held runs' calls."""

    calls: Calls
    profile: Profile | None
    label: str
    folded: Folded | None = None
    digest: Digest | None = None

    @property
    def format(self) -> str:
        return str(self.calls.meta.get("format") or "trace")

    @property
    def table(self) -> Calls | Folded:
        """What the layer table and the op-type times are made from: every call, whole or folded."""
        return self.folded if self.folded is not None else self.calls

    def runs(self) -> RunSet | None:
        """The trace's runs: found by its streamed reading, or in its table (None: no start times)."""
        return self.digest.runs if self.digest is not None else run_set(self.calls, self.profile)

    def close(self) -> None:
        """Remove what a streamed reading left on disk (the device activities)."""
        if self.folded is not None:
            release(self.folded)


def model_name(profile: Profile) -> str:
    return profile.metadata.model.name


def from_profile(profile: Profile, label: str | None = None) -> Source:
    return Source(profile.calls(), profile, label or model_name(profile))


def load(path: str | Path, whole_bytes: int = streamed.WHOLE_BYTES) -> Source:
    """The trace at ``path`` (any format ``layerperf analyze`` reads; a profile directory stands for its
    trace.json; a foreign trace larger than ``whole_bytes`` read streamed). Unreadable input raises
    InputError."""

    trace = resolve(Path(path))
    if trace.is_file() and streamed.streamed(trace, whole_bytes):
        calls, folded, digest = streamed.read(trace)
        if folded is not None:
            return Source(calls, None, trace.name, folded, digest)
    else:
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
        return load(subject, streamed.WHOLE_BYTES)
    raise TypeError(f"cannot report on a {type(subject).__name__}: give a Profile, a Calls table or a trace path")
