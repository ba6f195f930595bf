"""What a backend calls at layer boundaries: the Collector protocol, several collectors as one, and
the pairing of the raw reads taken at each layer's start and stop.

A backend runs a *pass* (one execution of the whole model) as::

    collector.begin_pass()
    for i, layer in enumerate(layers):     # in execution order; a layer may run again, or inside another
        collector.start(i)
        run(layer)
        collector.stop(i)
    collector.end_pass()

``start`` and ``stop`` only take a raw reading (a clock, a counter group, ``/proc/self/statm``) and
keep it: whatever they do between the reading and the layer lands on the layer's figures, so the
arithmetic that turns readings into figures waits until the passes are over.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, Protocol, TypeVar, cast

from layerperf.errors import BackendError

R = TypeVar("R")

#: One boundary reading: the layer index at a start, ``~index`` (below 0) at a stop, and the raw value.
Mark = tuple[int, R]


class Collector(Protocol):
    """Called by a backend around each pass and each layer of it (``layer``: index in the Profile's layers)."""

    def begin_pass(self) -> None: ...

    def start(self, layer: int) -> None: ...

    def stop(self, layer: int) -> None: ...

    def end_pass(self) -> None: ...


#: Runs the model once through a collector: begin_pass, start/stop around every layer, end_pass.
PassFn = Callable[[Collector], object]


class Boundaries:
    """Several collectors driven as one: started in the order given and stopped in reverse, so the
    first one's readings enclose the others' (put the one whose figures matter most last)."""

    def __init__(self, collectors: Sequence[Collector]) -> None:
        self.collectors = tuple(collectors)
        if len(self.collectors) == 1:  # no loop at the boundary for the common case
            only = self.collectors[0]
            self.start: Callable[[int], None] = only.start
            self.stop: Callable[[int], None] = only.stop
            return
        starts = tuple(c.start for c in self.collectors)
        stops = tuple(c.stop for c in reversed(self.collectors))

        def start(layer: int) -> None:
            for f in starts:
                f(layer)

        def stop(layer: int) -> None:
            for f in stops:
                f(layer)

        self.start, self.stop = start, stop

    def begin_pass(self) -> None:
        for c in self.collectors:
            c.begin_pass()

    def end_pass(self) -> None:
        for c in reversed(self.collectors):
            c.end_pass()


def empty_pass(collector: Collector) -> None:
    """A pass over one layer that does nothing: what a boundary costs by itself (the default calibration)."""
    collector.begin_pass()
    collector.start(0)
    collector.stop(0)
    collector.end_pass()


class MarkLog(Generic[R]):
    """The raw readings of every pass, kept as taken; :func:`pairs` matches them up afterwards.

    A collector keeps the ``append`` that :meth:`begin` returns and calls it at each boundary.
    """

    def __init__(self) -> None:
        self.passes: list[list[Mark[R]]] = []

    def begin(self) -> Callable[[Mark[R]], None]:
        marks: list[Mark[R]] = []
        self.passes.append(marks)
        return marks.append


def outside_pass(mark: object) -> None:
    """What a collector's boundary appends to outside a pass: the backend forgot begin_pass()."""
    raise BackendError("a layer boundary was called outside a pass", hint="call begin_pass() first")


def pairs(marks: Sequence[Mark[R]]) -> list[tuple[int, R, R]]:
    """(layer, reading at start, reading at stop) for each layer call of one pass, in stop order.

    Calls may nest (a layer inside another, stopped first); a stop that closes no open start of the
    same layer, or a start never stopped, is the backend's mistake and is told, not guessed at.
    """
    open_: list[tuple[int, R]] = []
    out: list[tuple[int, R, R]] = []
    for layer, value in marks:
        if layer >= 0:
            open_.append((layer, value))
            continue
        layer = ~layer
        if not open_ or open_[-1][0] != layer:
            raise BackendError(f"layer {layer} stopped without a matching start "
                               f"(open: {[i for i, _ in open_] or 'none'})")
        out.append((layer, open_.pop()[1], value))
    if open_:
        raise BackendError(f"layers started and never stopped in a pass: {[i for i, _ in open_]}")
    return out


def nested(marks: Sequence[Mark[R]]) -> list[tuple[int, R, R, int]]:
    """(layer, reading at start, reading at stop, enclosing call) for each layer call of one pass, in
    start order; the enclosing call is the index, in this list, of the call it ran directly inside
    (-1 at top level). Mismatched boundaries are told as by :func:`pairs`."""
    started: list[tuple[int, R, int]] = []  # (layer, start reading, enclosing call), in start order
    stops: list[R | None] = []
    open_: list[int] = []
    for layer, value in marks:
        if layer >= 0:
            started.append((layer, value, open_[-1] if open_ else -1))
            stops.append(None)
            open_.append(len(started) - 1)
            continue
        layer = ~layer
        if not open_ or started[open_[-1]][0] != layer:
            raise BackendError(f"layer {layer} stopped without a matching start "
                               f"(open: {[started[i][0] for i in open_] or 'none'})")
        stops[open_.pop()] = value
    if open_:
        raise BackendError(f"layers started and never stopped in a pass: {[started[i][0] for i in open_]}")
    return [(layer, a, cast(R, b), up) for (layer, a, up), b in zip(started, stops, strict=True)]


def self_values(calls: Sequence[tuple[int, float, int]]) -> list[float]:
    """Each call's value less its direct children's (``calls``: layer, inclusive value, enclosing call
    as from :func:`nested`); NaN where its own or a child's is NaN: an unknown is never taken for 0."""
    out = [value for _, value, _ in calls]
    for _, value, up in reversed(calls):
        if up >= 0:
            out[up] -= value
    return out
