"""The perf-counter collector: its request (which events, under which labels, over how many passes),
and the collector that reads a counter group at each layer boundary."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from layerperf.collectors.boundary import MarkLog, nested, outside_pass, self_values
from layerperf.counters import CounterSet, parse_perf_config, resolve, schedule
from layerperf.counters.metrics import METRICS
from layerperf.counters.reading import Reading
from layerperf.data.table import label_clash
from layerperf.errors import CounterError


def event_names(events: str | Sequence[str] | None) -> list[str]:
    """Event strings as the API and ``--events`` take them: names, or strings of names separated by commas
    (not a string's letters), trimmed. None or empty: none. CounterError for an item naming no event, an empty
    name (``a,,b``) or names separated by spaces, in the words ``--events`` uses."""
    if not events:
        return []
    items = [events] if isinstance(events, str) else list(events)
    if not all(isinstance(i, str) for i in items):
        raise CounterError(f"events are names (strings), got {events!r}", "such as ['task-clock', 'page-faults']")
    text = ",".join(items)
    names = [n.strip() for n in text.split(",")]
    if not any(names):
        raise CounterError(f"no event named in {text!r}; name them separated by commas, such as "
                           "task-clock,page-faults")
    if not all(names):
        raise CounterError(f"an empty event name in {text!r}")
    spaced = next((n for n in names if len(n.split()) > 1), None)
    if spaced is not None:
        raise CounterError(f"{spaced!r} is not an event name: separate events by commas, such as "
                           f"{','.join(spaced.split())}")
    return names


@dataclass(frozen=True, slots=True)
class CounterRequest:
    """What to count: event strings and the label each is reported under."""

    events: tuple[str, ...]
    labels: tuple[str, ...]
    passes: int = 5
    multiplex: bool = False

    @classmethod
    def build(cls, events: str | Sequence[str] | None, perf_config: str | Path | None, passes: int = 5,
              multiplex: bool = False) -> CounterRequest | None:
        pairs: dict[str, str] = {}
        if perf_config:
            pairs.update(parse_perf_config(perf_config))
        for ev in event_names(events):
            pairs.setdefault(ev, ev)
        if not pairs:
            return None
        if (clash := label_clash(list(pairs.values()), METRICS)) is not None:
            raise CounterError(clash, "give it another label in the perf config")
        if passes < 1:
            raise CounterError(f"--passes must be at least 1, got {passes}")
        return cls(tuple(pairs), tuple(pairs.values()), passes, multiplex)

    def check(self) -> None:
        """Fail fast, before any profiling: resolve every event and open it once on this thread."""

        specs = [resolve(e) for e in self.events]
        for group in ([specs] if self.multiplex else schedule(specs)):
            with CounterSet(group, threads="self") as cs:
                cs.enable()
                cs.read()


class CounterGroup(Protocol):
    """What the collector needs of a :class:`~layerperf.counters.CounterSet` (a test may pass its own)."""

    @property
    def names(self) -> tuple[str, ...]: ...

    def read_raw(self) -> tuple[int, ...]: ...


class PerfCounters:
    """One counter group, read raw at each layer boundary (``CounterSet.read_raw``: the enabled and
    running times, then each event's count, summed over the group's threads).

    Afterwards, :meth:`tally` gives each layer's delta per pass, scaled for multiplexing by
    time_enabled / time_running, less ``overhead`` (what an empty boundary counts, per event) and
    never below 0; calls of a layer within one pass add up. A layer's count is its *self* count,
    as its time is self time: the delta read at its boundaries less the deltas of the layer calls
    made directly inside it (a module's children), so a column sums to the whole pass once. The
    *inclusive* count (children's included) is given beside it. A layer that did not run in a pass
    has NaN there, an unknown, not a 0.
    """

    def __init__(self, group: CounterGroup, overhead: Mapping[str, float] | None = None) -> None:
        self.names = tuple(group.names)
        self.overhead = dict(overhead or {})
        self._read = group.read_raw
        self._log: MarkLog[tuple[int, ...]] = MarkLog()
        self._add: Callable[[tuple[int, tuple[int, ...]]], None] = outside_pass

    def begin_pass(self) -> None:
        self._add = self._log.begin()

    def start(self, layer: int) -> None:
        self._add((layer, self._read()))

    def stop(self, layer: int) -> None:
        self._add((~layer, self._read()))

    def end_pass(self) -> None:
        self._add = outside_pass

    @property
    def passes(self) -> int:
        return len(self._log.passes)

    def counts(self, n_layers: int) -> tuple[dict[str, list[list[float]]], list[list[float]]]:
        """Per event, each layer's self count per pass ``[layer][pass]``; and the fraction of its time
        the group was counted, ``[layer][pass]`` (1.0: exact). See :meth:`tally`."""
        tally = self.tally(n_layers)
        return tally.counts, tally.fraction

    def tally(self, n_layers: int) -> Tally:
        """Each layer's self and inclusive counts per pass, per event, and the fraction counted."""
        nan = float("nan")
        own = {name: [[nan] * self.passes for _ in range(n_layers)] for name in self.names}
        whole = {name: [[nan] * self.passes for _ in range(n_layers)] for name in self.names}
        fraction = [[nan] * self.passes for _ in range(n_layers)]
        for p, marks in enumerate(self._log.passes):
            calls = nested(marks)
            scaled: dict[str, list[float]] = {name: [] for name in self.names}
            times: dict[int, list[int]] = {}
            for layer, a, b, _ in calls:
                delta = Reading(self.names, tuple(x - y for x, y in zip(b[2:], a[2:], strict=True)),
                                b[0] - a[0], b[1] - a[1])
                for name, value in delta.scaled().items():
                    scaled[name].append(value)
                enabled_running = times.setdefault(layer, [0, 0])
                enabled_running[0] += delta.time_enabled
                enabled_running[1] += delta.time_running
            for name, values in scaled.items():
                tree = [(layer, v, up) for (layer, _, _, up), v in zip(calls, values, strict=True)]
                own_sums: dict[int, float] = {}
                whole_sums: dict[int, float] = {}
                for (layer, _, _, _), v, s in zip(calls, values, self_values(tree), strict=True):
                    # a layer's calls add up; one unknown call makes the pass's sum unknown (NaN + x)
                    whole_sums[layer] = whole_sums.get(layer, 0.0) + self._less(name, v)
                    own_sums[layer] = own_sums.get(layer, 0.0) + self._less(name, s)
                for layer, total in whole_sums.items():
                    whole[name][layer][p] = total
                    own[name][layer][p] = own_sums[layer]
            for layer, (enabled, running) in times.items():
                fraction[layer][p] = running / enabled if enabled > 0 else 1.0
        return Tally(own, whole, fraction)

    def _less(self, name: str, value: float) -> float:
        """A call's count less an empty boundary's, never below 0; NaN stays: unknown, not 0."""
        value = value - self.overhead.get(name, 0.0)
        return value if math.isnan(value) else max(0.0, value)


@dataclass(frozen=True, slots=True)
class Tally:
    """What :meth:`PerfCounters.tally` gives: by event, ``[layer][pass]`` self counts (``counts``) and
    inclusive ones; and the fraction of each layer's time the group was counted."""

    counts: dict[str, list[list[float]]]
    inclusive: dict[str, list[list[float]]]
    fraction: list[list[float]]
