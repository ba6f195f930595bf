"""What a fresh session actually used in its first runs: arena figures node by node, resident memory.

Backend-neutral data: a backend fills it (see :mod:`layerperf.backends.ort.memory`), the report
reads it. Arena figures are aligned with the profile's layers (None where a layer did not run or
the runtime reported nothing).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from layerperf.collectors.rss_sampler import RssSample

OptInts = tuple[int | None, ...]


@dataclass(frozen=True, slots=True)
class ArenaRun:
    """The runtime allocator's figures after each node of one run."""

    in_use_bytes: OptInts
    peak_bytes: OptInts
    held_bytes: OptInts


@dataclass(frozen=True, slots=True)
class RuntimeMemory:
    """The first runs of a fresh session: arena figures per node, and resident memory samples."""

    arena_runs: tuple[ArenaRun, ...] = ()
    arena_in_use_before_bytes: int | None = None  # before the first node of the first run
    arena_held_before_bytes: int | None = None
    sample_rate: int = 0
    rss_baseline_bytes: int | None = None  # just before the first run
    rss_hwm_bytes: int | None = None  # the largest reading over the runs, thinned-out ones included
    rss_samples: tuple[RssSample, ...] = ()

    @property
    def arena_growth_bytes(self) -> int | None:
        """How much the arena grew over the runs: held at its largest minus held before."""
        held = [h for run in self.arena_runs for h in run.held_bytes if h is not None]
        if not held or self.arena_held_before_bytes is None:
            return None
        return max(held) - self.arena_held_before_bytes

    @property
    def rss_growth_bytes(self) -> int | None:
        if self.rss_hwm_bytes is None or self.rss_baseline_bytes is None:
            return None
        return self.rss_hwm_bytes - self.rss_baseline_bytes

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["rss_samples"] = [asdict(s) for s in self.rss_samples]
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RuntimeMemory:
        def ints(xs: Any) -> OptInts:
            return tuple(None if x is None else int(x) for x in xs)

        return cls(
            arena_runs=tuple(ArenaRun(ints(r["in_use_bytes"]), ints(r["peak_bytes"]), ints(r["held_bytes"]))
                             for r in d.get("arena_runs", ())),
            arena_in_use_before_bytes=d.get("arena_in_use_before_bytes"),
            arena_held_before_bytes=d.get("arena_held_before_bytes"),
            sample_rate=int(d.get("sample_rate", 0)),
            rss_baseline_bytes=d.get("rss_baseline_bytes"), rss_hwm_bytes=d.get("rss_hwm_bytes"),
            rss_samples=tuple(RssSample(**s) for s in d.get("rss_samples", ())),
        )
