"""The resident-memory high-water mark of a measurement, from /proc/self/status.

Linux keeps one peak (VmHWM) per process. Writing ``5`` to /proc/self/clear_refs resets it to the
current resident size, so a measurement can own its peak: delta = VmHWM after - VmRSS before. Where
that reset is refused (or /proc is missing) the fallback is ``ru_maxrss``, which cannot be reset:
its delta is only a lower bound (0 when the process had peaked higher before), and says so.
"""

from __future__ import annotations

import re
import resource
import sys
from dataclasses import dataclass

_STATUS = "/proc/self/status"


def _status_kib(key: str) -> int | None:
    try:
        with open(_STATUS) as f:
            m = re.search(rf"^{key}:\s+(\d+)\s+kB", f.read(), re.MULTILINE)
    except OSError:
        return None
    return int(m.group(1)) if m else None


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return True


def _ru_maxrss_bytes() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # macOS reports bytes, Linux KiB


@dataclass(slots=True)
class PeakMemory:
    """Measures the resident peak of what happens between start() and stop(), in bytes."""

    source: str = ""
    _before: int = 0

    def start(self) -> None:
        rss = _status_kib("VmRSS")
        if rss is not None and _reset_peak() and _status_kib("VmHWM") is not None:
            self.source, self._before = "VmHWM", rss * 1024
        else:
            self.source, self._before = "ru_maxrss", _ru_maxrss_bytes()

    def stop(self) -> int:
        if self.source == "VmHWM":
            return max(0, (_status_kib("VmHWM") or 0) * 1024 - self._before)
        return max(0, _ru_maxrss_bytes() - self._before)
