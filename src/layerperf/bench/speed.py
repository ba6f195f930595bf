"""The CPU's full speed on this machine, remembered between runs of ``layerperf bench``.

On a virtual machine the host can slow a core down for seconds at a time (another tenant on the
same physical core), and nothing inside the machine shows it as waiting. The yardstick — a fixed
pure-Python loop timed between the samples (:func:`layerperf.bench.measure.yardstick_ns`) — does:
it takes about twice as long. Two runs of the same op, one at full speed and one slowed, then
disagree by tens of percent. So each run remembers the fastest yardstick it saw (its 10th
percentile, robust to a stray reading) in ``$LAYERPERF_CACHE/bench-speed.json``, keyed by the
machine, and later runs set aside the samples taken slower than that speed allows.
"""

from __future__ import annotations

import json
from pathlib import Path

from layerperf.data.machine import fingerprint
from layerperf.util import atomic
from layerperf.util.cache import cache_root


def path() -> Path:
    return cache_root() / "bench-speed.json"


def _key() -> str:
    m = fingerprint()
    return f"{m['cpu']}|{m['cores']}|{m['kernel']}|{m['python']}"


def _read() -> dict[str, float]:
    try:
        data = json.loads(path().read_text())
    except (OSError, ValueError):
        return {}
    return {k: float(v) for k, v in data.items() if isinstance(v, int | float) and v > 0} \
        if isinstance(data, dict) else {}


def reference_ns() -> float | None:
    """The full-speed yardstick remembered for this machine, if any."""
    return _read().get(_key())


def remember(yardstick_p10_ns: float) -> None:
    """Keep ``yardstick_p10_ns`` when it is faster than what is remembered (best effort: a cache)."""
    if not yardstick_p10_ns > 0:
        return
    data = _read()
    key = _key()
    if key in data and data[key] <= yardstick_p10_ns:
        return
    data[key] = yardstick_p10_ns
    target = path()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_bytes(target, json.dumps(data).encode())
    except OSError:
        pass
