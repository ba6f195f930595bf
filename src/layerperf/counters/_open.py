"""Opening one counter group on one thread, and turning the kernel's errno into a CounterError."""

from __future__ import annotations

import contextlib
import errno
import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass

from layerperf.counters import abi
from layerperf.counters.event import EventSpec
from layerperf.counters.perms import Privilege, kernel_refusal
from layerperf.errors import CounterError

# nr, time_enabled, time_running, then one value per member (no PERF_FORMAT_ID: members come back
# in the order they were added to the group, which we know).
READ_FORMAT = abi.PERF_FORMAT_GROUP | abi.PERF_FORMAT_TOTAL_TIME_ENABLED | abi.PERF_FORMAT_TOTAL_TIME_RUNNING
HEADER_WORDS = 3

_NOT_SUPPORTED = (errno.ENOENT, errno.EOPNOTSUPP, errno.ENODEV)
_DENIED = (errno.EACCES, errno.EPERM)


class GroupTooBig(CounterError):
    """The kernel refused to add a hardware event to a group: the PMU has no counter left for it."""


@dataclass(frozen=True, slots=True)
class Exclusion:
    """The privilege-level bits of one event's attr."""

    exclude_user: bool
    exclude_kernel: bool


USER_ONLY = Exclusion(exclude_user=False, exclude_kernel=True)


def exclusion_for(spec: EventSpec, include_kernel: bool | None, priv: Privilege) -> Exclusion:
    """Decide user/kernel counting for one event, refusing what the paranoid level forbids.

    Explicit modifiers (`:u`, `:k`) win; otherwise user mode always, kernel mode when
    include_kernel is True, or for kernel-only events unless include_kernel is False.
    """
    if spec.modifiers:
        user, kernel = "u" in spec.modifiers, "k" in spec.modifiers
    else:
        user = True
        kernel = include_kernel is True or (spec.kernel_only and include_kernel is None)
    if spec.kernel_only and not kernel:
        raise CounterError(
            f"{spec.name} is only raised in kernel mode, so counting user mode only would read 0",
            "drop the event, or let it count kernel mode (include_kernel=None or True)",
        )
    if kernel and not priv.kernel_allowed:
        what = spec.name
        if spec.kernel_only:
            what = f"{spec.name} (raised only in kernel mode; it reads 0 in user-only counting)"
        raise kernel_refusal(priv, what)
    return Exclusion(exclude_user=not user, exclude_kernel=not kernel)


def make_attr(spec: EventSpec, excl: Exclusion, *, leader: bool) -> abi.PerfEventAttr:
    """The attr for one group member; the leader starts disabled so enable() decides when to count."""
    attr = abi.new_attr(spec.type, spec.config, config1=spec.config1, config2=spec.config2)
    attr.read_format = READ_FORMAT
    attr.disabled = 1 if leader else 0
    attr.exclude_user = int(excl.exclude_user)
    attr.exclude_kernel = int(excl.exclude_kernel)
    attr.exclude_hv = 1
    return attr


def open_group(
    tid: int, specs: Sequence[EventSpec], excls: Sequence[Exclusion], priv: Privilege
) -> list[int]:
    """Open specs as one group on thread tid (leader first); returns the fds, leader first.

    Raises OSError(ESRCH) unchanged when the thread is gone, CounterError for everything else.
    """
    fds: list[int] = []
    try:
        for i, (spec, excl) in enumerate(zip(specs, excls, strict=True)):
            attr = make_attr(spec, excl, leader=i == 0)
            group_fd = fds[0] if fds else -1
            try:
                fds.append(abi.perf_event_open(attr, tid, -1, group_fd))
            except OSError as exc:
                if exc.errno == errno.ESRCH:
                    raise
                raise classify(exc, spec, excl, priv, member=i > 0, group=specs) from None
    except BaseException:
        close_all(fds)
        raise
    return fds


def close_all(fds: Sequence[int]) -> None:
    """Close fds, ignoring ones already closed."""
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


@functools.lru_cache(maxsize=1)
def hardware_pmu_present() -> bool | None:
    """Whether the kernel exposes a hardware PMU: True, False, or None when we cannot tell."""
    attr = abi.new_attr(abi.PERF_TYPE_HARDWARE, abi.PERF_COUNT_HW_CPU_CYCLES)
    attr.disabled = 1
    attr.exclude_kernel = 1
    attr.exclude_hv = 1
    try:
        os.close(abi.perf_event_open(attr, 0, -1))
    except OSError as exc:
        # With no PMU driver, no PMU claims PERF_TYPE_HARDWARE and the kernel says ENOENT.
        return False if exc.errno in _NOT_SUPPORTED else None
    return True


def classify(
    exc: OSError,
    spec: EventSpec,
    excl: Exclusion,
    priv: Privilege,
    *,
    member: bool,
    group: Sequence[EventSpec] = (),
) -> CounterError:
    """One clear CounterError for a failed perf_event_open."""
    code = exc.errno or 0
    tag = f"{errno.errorcode.get(code, code)}"
    if code in _DENIED:
        return _denied(spec, excl, priv, tag)
    if code in _NOT_SUPPORTED:
        return _unsupported(spec, tag)
    if code == errno.EINVAL and member and spec.uses_pmu_counter:
        names = ", ".join(s.name for s in group)
        return GroupTooBig(
            f"the events {names} do not fit together in this PMU's counters ({tag} adding {spec.name})",
            "split them into passes with layerperf.counters.schedule()",
        )
    if code == errno.EINVAL:
        return CounterError(
            f"the kernel rejects the encoding of {spec.name} "
            f"(type={spec.type} config={spec.config:#x}; {tag})",
            "check the raw code and its modifiers",
        )
    if code in (errno.EMFILE, errno.ENFILE):
        return CounterError(
            f"out of file descriptors opening {spec.name} ({tag}): one fd per event per thread",
            "raise the limit with `ulimit -n`, or count fewer events or threads",
        )
    if code == errno.EBUSY:
        return CounterError(f"the PMU is in exclusive use by another user ({tag})", "retry later")
    return CounterError(f"perf_event_open failed for {spec.name}: {os.strerror(code)} ({tag})")


def _denied(spec: EventSpec, excl: Exclusion, priv: Privilege, tag: str) -> CounterError:
    if not excl.exclude_kernel:
        return kernel_refusal(priv, spec.name)
    return CounterError(
        f"perf_event_open was denied for {spec.name} ({tag}; kernel.perf_event_paranoid is {priv.paranoid})",
        "sysctl -w kernel.perf_event_paranoid=2, or grant CAP_PERFMON; in a container the seccomp "
        "profile must allow perf_event_open",
    )


def _unsupported(spec: EventSpec, tag: str) -> CounterError:
    if not spec.uses_pmu_counter:
        return CounterError(f"{spec.name} is not supported by this kernel ({tag})")
    if hardware_pmu_present() is False:
        return CounterError(
            f"{spec.name} is not supported on this machine: no hardware PMU is exposed "
            f"(common in VMs; {tag})",
            "software events (task-clock, page-faults, ...) still work; hardware counters need "
            "bare metal or a VM with a virtual PMU",
        )
    return CounterError(
        f"{spec.name} is not supported by this CPU's PMU ({tag})",
        "`layerperf events` lists what this machine can count",
    )
