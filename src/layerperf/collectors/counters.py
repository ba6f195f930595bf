"""The perf-counter collector's request: which events to count, under which labels, over how many passes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from layerperf.errors import CounterError


@dataclass(frozen=True, slots=True)
class CounterRequest:
    """What to count: event strings and the label each is reported under."""

    events: tuple[str, ...]
    labels: tuple[str, ...]
    passes: int = 5
    multiplex: bool = False

    @classmethod
    def build(cls, events: list[str] | None, perf_config: str | Path | None, passes: int = 5,
              multiplex: bool = False) -> CounterRequest | None:
        from layerperf.counters import parse_perf_config

        pairs: dict[str, str] = {}
        if perf_config:
            pairs.update(parse_perf_config(perf_config))
        for ev in events or []:
            pairs.setdefault(ev, ev)
        if not pairs:
            return None
        if passes < 1:
            raise CounterError(f"--passes must be at least 1, got {passes}")
        return cls(tuple(pairs), tuple(pairs.values()), passes, multiplex)

    def check(self) -> None:
        """Fail fast, before any profiling: resolve every event and open it once on this thread."""
        from layerperf.counters import CounterSet, resolve, schedule

        specs = [resolve(e) for e in self.events]
        for group in ([specs] if self.multiplex else schedule(specs)):
            with CounterSet(group, threads="self") as cs:
                cs.enable()
                cs.read()


# -- parent side ------------------------------------------------------------------------------------
