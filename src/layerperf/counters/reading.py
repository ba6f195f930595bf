"""Reading: one snapshot of a CounterSet, summed over the threads it watches."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Reading:
    """Raw counts per event (summed over threads) with the summed enabled/running times in ns.

    Readings are cumulative; subtract two to get what happened in between (`after - before`).
    time_running < time_enabled means the kernel multiplexed the group; see `fraction_counted`.
    """

    names: tuple[str, ...]
    values: tuple[int, ...]
    time_enabled: int
    time_running: int

    def __getitem__(self, name: str) -> int:
        try:
            return self.values[self.names.index(name)]
        except ValueError:
            raise KeyError(name) from None

    def as_dict(self) -> dict[str, int]:
        """{event name: raw count}."""
        return dict(zip(self.names, self.values, strict=True))

    def __sub__(self, other: Reading) -> Reading:
        if not isinstance(other, Reading):
            return NotImplemented
        if other.names != self.names:
            raise ValueError("cannot subtract readings of different event sets")
        return Reading(
            self.names,
            tuple(a - b for a, b in zip(self.values, other.values, strict=True)),
            self.time_enabled - other.time_enabled,
            self.time_running - other.time_running,
        )

    @property
    def fraction_counted(self) -> float:
        """time_running / time_enabled: 1.0 when every count is exact, 0.0 when nothing was counted."""
        if self.time_enabled <= 0:
            return 1.0
        return self.time_running / self.time_enabled

    def scaled(self) -> dict[str, float]:
        """Counts extrapolated for multiplexing: value * enabled / running.

        A group that never ran while enabled has no estimate: NaN, never a made-up zero.
        """
        if self.time_enabled <= 0 or self.time_running == self.time_enabled:
            return {n: float(v) for n, v in zip(self.names, self.values, strict=True)}
        if self.time_running <= 0:
            return {n: float("nan") for n in self.names}
        factor = self.time_enabled / self.time_running
        return {n: v * factor for n, v in zip(self.names, self.values, strict=True)}
