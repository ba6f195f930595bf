"""Human-readable figures with their units; None prints as the given placeholder, never as 0."""

from __future__ import annotations

import math

_SI = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def si(value: float | None, unit: str = "", unknown: str = "?") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return unknown
    for scale, prefix in _SI:
        if abs(value) >= scale:
            return f"{value / scale:.2f} {prefix}{unit}"
    return f"{value:.0f} {unit}".rstrip() if float(value).is_integer() else f"{value:.3g} {unit}".rstrip()


def binary(n: float | None, unknown: str = "?") -> str:
    """Bytes with binary prefixes (KiB, MiB, GiB)."""
    if n is None:
        return unknown
    for scale, prefix in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {prefix}"
    return f"{n:.0f} B"


def duration_us(us: float | None, unknown: str = "?") -> str:
    if us is None or math.isnan(us):
        return unknown
    if us >= 1e6:
        return f"{us / 1e6:.3f} s"
    if us >= 1e3:
        return f"{us / 1e3:.3f} ms"
    return f"{us:.1f} µs"


def percent(x: float | None) -> str:
    return "?" if x is None or math.isnan(x) else f"{100 * x:.1f}%"


def count(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless one: ``1 run``, ``3 runs``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
