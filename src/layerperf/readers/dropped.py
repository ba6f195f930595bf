"""Events a reader leaves out or repairs, counted by reason, so that nothing vanishes silently.

Every reader counts here what it could not use: a complete event whose duration is negative, null,
not a number (``"NaN"``) or absurd, or whose start is missing; an ``E`` with no ``B`` open on its
thread, a ``B`` never closed; an item of the events array that is not an object. The counts (with
the first event's name as an example) go into the table's ``meta["dropped"]`` as
``{reason: {"events": n, "example": name}}``, and every view says them as a warning.

Negative durations are refused, not kept: a duration below zero is no time that ran (a clock that
went back, a damaged file), and adding it would make an op's total smaller than the work it did —
HTA keeps such an event and subtracts it. Left out and named, the rest of the trace stays exact.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

NEGATIVE = "negative duration"
NO_DURATION = "no duration (null or missing)"
NOT_A_NUMBER = "duration not a number"
TOO_LONG = "duration beyond 126 years"
INFINITE = "duration infinite"
NO_START = "no start time"
E_WITHOUT_B = "E event with no B open on its thread"
B_WITHOUT_E = "B event never closed by an E"
NOT_EVENT = "array item that is not an event object"

WHY = {
    NEGATIVE: "refused: a negative duration is no time that ran; counted, it would make totals smaller than "
              "the work done (HTA keeps and subtracts it)",
}


class Dropped:
    """Counts of left-out events by reason, with one example name each (the first seen)."""

    __slots__ = ("counts", "examples")

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.examples: dict[str, str] = {}

    def add(self, reason: str, n: int = 1, example: Any = None) -> None:
        if n <= 0:
            return
        self.counts[reason] = self.counts.get(reason, 0) + n
        if reason not in self.examples and example is not None:
            self.examples[reason] = example if isinstance(example, str) else str(example)

    def merge(self, other: Dropped | Mapping[str, Any] | None) -> None:
        """Add another reader's (or part's) counts, or a ``meta["dropped"]`` document."""
        if other is None:
            return
        if isinstance(other, Dropped):
            for reason, n in other.counts.items():
                self.add(reason, n, other.examples.get(reason))
            return
        for reason, info in other.items():
            self.add(reason, int(info.get("events", 0)), info.get("example"))

    def __bool__(self) -> bool:
        return bool(self.counts)

    def doc(self) -> dict[str, dict[str, Any]]:
        """``{reason: {"events": n, "example": name}}`` for meta and JSON."""
        return {reason: {"events": n, "example": self.examples.get(reason)} for reason, n in self.counts.items()}


def reason(ts: Any, dur: Any) -> str | None:
    """Why a complete event with these raw ``ts`` and ``dur`` values is left out; None when it is usable."""
    d = _number(dur)
    if dur is None:
        return NO_DURATION
    if d is None or math.isnan(d):
        return NOT_A_NUMBER
    if d < 0:
        return NEGATIVE
    if math.isinf(d):  # "Infinity", or a number past float64's range
        return INFINITE
    if d >= 4e15:
        return TOO_LONG
    t = _number(ts)
    if t is None or not math.isfinite(t) or abs(t) >= 4e15:
        return NO_START
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return None


def count_rejected(dropped: Dropped, names: Iterable[Any], ts: Iterable[Any], dur: Iterable[Any]) -> None:
    """Count the events (given by their raw fields) a reader rejected, by reason."""
    for name, t, d in zip(names, ts, dur, strict=True):
        why = reason(t, d)
        if why is not None:
            dropped.add(why, 1, name)


def warnings(meta: Mapping[str, Any]) -> list[str]:
    """One line per reason a trace's events were left out (``meta["dropped"]``), for people."""
    lines = []
    for why, info in (meta.get("dropped") or {}).items():
        n = int(info.get("events", 0))
        example = info.get("example")
        eg = f" (e.g. {example!r})" if example else ""
        policy = f"; {WHY[why]}" if why in WHY else ""
        lines.append(f"{n} event{'' if n == 1 else 's'} left out: {why}{eg}{policy}")
    return lines
