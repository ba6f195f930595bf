"""What this process may count, decided from kernel.perf_event_paranoid and capabilities.

The kernel's rules for per-thread counters (kernel/events/core.c):
  * CAP_PERFMON (5.8+) or CAP_SYS_ADMIN ("perfmon_capable") bypasses perf_event_paranoid;
    being uid 0 without those capabilities does not.
  * paranoid >= 2: unprivileged callers must set exclude_kernel (and the kernel answers EACCES
    otherwise); paranoid <= 1 lets them count kernel mode too.
  * paranoid >= 3 is a Debian/Ubuntu/Android patch: no perf_event_open at all without privilege.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from layerperf.errors import CounterError

PARANOID_PATH = Path("/proc/sys/kernel/perf_event_paranoid")
CAP_SYS_ADMIN = 21
CAP_PERFMON = 38


@dataclass(frozen=True, slots=True)
class Privilege:
    """The inputs to the kernel's permission check: the paranoid level and whether we are capable."""

    paranoid: int
    perfmon_capable: bool

    @property
    def user_allowed(self) -> bool:
        """Whether user-mode counting of our own threads is allowed."""
        return self.perfmon_capable or self.paranoid <= 2

    @property
    def kernel_allowed(self) -> bool:
        """Whether kernel-mode counting (exclude_kernel=0) is allowed."""
        return self.perfmon_capable or self.paranoid <= 1


def read_paranoid(path: Path = PARANOID_PATH) -> int:
    """kernel.perf_event_paranoid; a kernel without perf events has no such file."""
    try:
        return int(path.read_text().strip())
    except FileNotFoundError:
        raise CounterError(
            "this kernel has no perf events support (no /proc/sys/kernel/perf_event_paranoid)",
            "a kernel built with CONFIG_PERF_EVENTS is needed",
        ) from None


def _effective_caps(status_path: Path = Path("/proc/self/status")) -> int:
    for line in status_path.read_text().splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    return 0


def current_privilege() -> Privilege:
    """The privilege of this process right now."""
    caps = _effective_caps()
    capable = bool(caps & (1 << CAP_PERFMON) or caps & (1 << CAP_SYS_ADMIN))
    return Privilege(paranoid=read_paranoid(), perfmon_capable=capable)


def _sysctl_hint(level: int) -> str:
    return f"sysctl -w kernel.perf_event_paranoid={level} (or run with CAP_PERFMON)"


def require_user(priv: Privilege) -> None:
    """Raise unless user-mode counting is allowed."""
    if not priv.user_allowed:
        raise CounterError(
            f"perf_event_open is disabled for unprivileged users (kernel.perf_event_paranoid is "
            f"{priv.paranoid}; counting user mode needs 2 or lower)",
            _sysctl_hint(2),
        )


def kernel_refusal(priv: Privilege, what: str) -> CounterError:
    """The error for `what` needing kernel-mode counting that the paranoid level forbids."""
    return CounterError(
        f"{what} needs kernel-mode counting, which kernel.perf_event_paranoid={priv.paranoid} "
        f"forbids without CAP_PERFMON (it needs 1 or lower)",
        _sysctl_hint(1),
    )
