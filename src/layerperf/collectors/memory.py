"""The memory collector's request: the memory profile, with resident memory sampled every ``sample_rate`` layers."""

from __future__ import annotations

from dataclasses import dataclass

from layerperf.errors import InputError

DEFAULT_SAMPLE_RATE = 1


@dataclass(frozen=True, slots=True)
class MemoryRequest:
    """A validated request for the memory profile, made before any run so bad options fail first."""

    sample_rate: int = DEFAULT_SAMPLE_RATE

    @classmethod
    def make(cls, memory: bool, sample_rate: int | None) -> MemoryRequest | None:
        if not memory:
            if sample_rate is not None:
                raise InputError("a sample rate applies to the memory profile only", hint="add --memory")
            return None
        rate = DEFAULT_SAMPLE_RATE if sample_rate is None else sample_rate
        if isinstance(rate, bool) or not isinstance(rate, int) or rate < 0:
            raise InputError(f"--sample-rate must be an integer, 0 (off) or more, got {sample_rate!r}")
        if rate:
            from layerperf.memory.sampler import check_available

            check_available()
        return cls(rate)
