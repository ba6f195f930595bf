"""One countable event: what perf_event_open is given for it, and how it is named."""

from __future__ import annotations

from dataclasses import dataclass

from layerperf.counters import abi


@dataclass(frozen=True, slots=True)
class EventSpec:
    """One countable event: what to put in perf_event_attr, and how to name it.

    `modifiers` is "" (user mode, plus kernel mode when the CounterSet includes it), "u", "k" or "uk"
    (an explicit privilege-level choice, as in perf's `cycles:u`). `kernel_only` marks events the
    kernel raises only in kernel mode, which read 0 in user-only counting.
    """

    name: str
    type: int
    config: int
    config1: int = 0
    config2: int = 0
    kernel_only: bool = False
    modifiers: str = ""

    @property
    def key(self) -> tuple[int, int, int, int]:
        """What the kernel counts, independent of how the event was spelled."""
        return (self.type, self.config, self.config1, self.config2)

    @property
    def uses_pmu_counter(self) -> bool:
        """Whether the event occupies a hardware counter (software and tracepoint events do not)."""
        return self.type not in (abi.PERF_TYPE_SOFTWARE, abi.PERF_TYPE_TRACEPOINT)
