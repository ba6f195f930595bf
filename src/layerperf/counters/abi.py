"""The Linux perf_event_open(2) ABI, spelled out for ctypes.

Everything here mirrors include/uapi/linux/perf_event.h; the numbers are kernel ABI and never change
once published, which is why they can live in Python without a compiled extension.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import platform
from typing import Any

# --- attr.type -----------------------------------------------------------------------------------
PERF_TYPE_HARDWARE = 0
PERF_TYPE_SOFTWARE = 1
PERF_TYPE_TRACEPOINT = 2
PERF_TYPE_HW_CACHE = 3
PERF_TYPE_RAW = 4
PERF_TYPE_BREAKPOINT = 5

# --- attr.config for PERF_TYPE_HARDWARE ------------------------------------------------------------
PERF_COUNT_HW_CPU_CYCLES = 0
PERF_COUNT_HW_INSTRUCTIONS = 1
PERF_COUNT_HW_CACHE_REFERENCES = 2
PERF_COUNT_HW_CACHE_MISSES = 3
PERF_COUNT_HW_BRANCH_INSTRUCTIONS = 4
PERF_COUNT_HW_BRANCH_MISSES = 5
PERF_COUNT_HW_BUS_CYCLES = 6
PERF_COUNT_HW_STALLED_CYCLES_FRONTEND = 7
PERF_COUNT_HW_STALLED_CYCLES_BACKEND = 8
PERF_COUNT_HW_REF_CPU_CYCLES = 9

# --- attr.config for PERF_TYPE_HW_CACHE: id | op << 8 | result << 16 -------------------------------
PERF_COUNT_HW_CACHE_L1D = 0
PERF_COUNT_HW_CACHE_L1I = 1
PERF_COUNT_HW_CACHE_LL = 2
PERF_COUNT_HW_CACHE_DTLB = 3
PERF_COUNT_HW_CACHE_ITLB = 4
PERF_COUNT_HW_CACHE_BPU = 5
PERF_COUNT_HW_CACHE_NODE = 6

PERF_COUNT_HW_CACHE_OP_READ = 0
PERF_COUNT_HW_CACHE_OP_WRITE = 1
PERF_COUNT_HW_CACHE_OP_PREFETCH = 2

PERF_COUNT_HW_CACHE_RESULT_ACCESS = 0
PERF_COUNT_HW_CACHE_RESULT_MISS = 1


def hw_cache_config(cache_id: int, op: int, result: int) -> int:
    """attr.config of a PERF_TYPE_HW_CACHE event (the kernel packs three bytes)."""
    return cache_id | (op << 8) | (result << 16)


# --- attr.config for PERF_TYPE_SOFTWARE --------------------------------------------------------------
PERF_COUNT_SW_CPU_CLOCK = 0
PERF_COUNT_SW_TASK_CLOCK = 1
PERF_COUNT_SW_PAGE_FAULTS = 2
PERF_COUNT_SW_CONTEXT_SWITCHES = 3
PERF_COUNT_SW_CPU_MIGRATIONS = 4
PERF_COUNT_SW_PAGE_FAULTS_MIN = 5
PERF_COUNT_SW_PAGE_FAULTS_MAJ = 6
PERF_COUNT_SW_ALIGNMENT_FAULTS = 7
PERF_COUNT_SW_EMULATION_FAULTS = 8
PERF_COUNT_SW_DUMMY = 9
PERF_COUNT_SW_BPF_OUTPUT = 10
PERF_COUNT_SW_CGROUP_SWITCHES = 11

# --- attr.read_format --------------------------------------------------------------------------------
PERF_FORMAT_TOTAL_TIME_ENABLED = 1 << 0
PERF_FORMAT_TOTAL_TIME_RUNNING = 1 << 1
PERF_FORMAT_ID = 1 << 2
PERF_FORMAT_GROUP = 1 << 3
PERF_FORMAT_LOST = 1 << 4

# --- attr.sample_type, the records of a sampling event's ring buffer, attr.clockid ---------------------
PERF_SAMPLE_TID, PERF_SAMPLE_TIME, PERF_SAMPLE_READ = 1 << 1, 1 << 2, 1 << 4
PERF_RECORD_LOST, PERF_RECORD_SAMPLE = 2, 9
CLOCK_REALTIME = 0
# offsets of data_head and data_tail in struct perf_event_mmap_page, the ring buffer's first page
MMAP_DATA_HEAD, MMAP_DATA_TAIL = 1024, 1032

# --- perf_event_open flags ---------------------------------------------------------------------------
PERF_FLAG_FD_NO_GROUP = 1 << 0
PERF_FLAG_FD_OUTPUT = 1 << 1
PERF_FLAG_PID_CGROUP = 1 << 2
PERF_FLAG_FD_CLOEXEC = 1 << 3

# --- ioctls: _IO('$', n) is ('$' << 8) | n because _IO carries no size and no direction bits ----------
PERF_EVENT_IOC_ENABLE = 0x2400
PERF_EVENT_IOC_DISABLE = 0x2401
PERF_EVENT_IOC_REFRESH = 0x2402
PERF_EVENT_IOC_RESET = 0x2403
# _IOR('$', 7, __u64 *): direction read (2 << 30) | size 8 (pointer) << 16 | '$' << 8 | 7
PERF_EVENT_IOC_ID = 0x80082407
# Applied to a group leader, the ioctl acts on every member of its group.
PERF_IOC_FLAG_GROUP = 1

# --- sizes of struct perf_event_attr as it grew; the kernel accepts any of them ----------------------
PERF_ATTR_SIZE_VER0 = 64
PERF_ATTR_SIZE_VER1 = 72  # config2
PERF_ATTR_SIZE_VER2 = 80  # branch_sample_type
PERF_ATTR_SIZE_VER3 = 96  # sample_regs_user, sample_stack_user
PERF_ATTR_SIZE_VER4 = 104  # sample_regs_intr
PERF_ATTR_SIZE_VER5 = 112  # aux_watermark
PERF_ATTR_SIZE_VER6 = 120  # aux_sample_size
PERF_ATTR_SIZE_VER7 = 128  # sig_data
PERF_ATTR_SIZE_VER8 = 136  # config3

# perf_event_open has no libc wrapper; these are the per-architecture syscall numbers.
_SYSCALL_NUMBERS = {
    "x86_64": 298,
    "amd64": 298,
    "aarch64": 241,
    "arm64": 241,
    "riscv64": 241,  # asm-generic table, like aarch64
    "i386": 336,
    "i686": 336,
    "armv7l": 364,
    "ppc64le": 319,
    "ppc64": 319,
    "s390x": 331,
}
NR_PERF_EVENT_OPEN_X86_64 = 298
NR_PERF_EVENT_OPEN_AARCH64 = 241


class _SampleUnion(ctypes.Union):
    _fields_ = [("sample_period", ctypes.c_uint64), ("sample_freq", ctypes.c_uint64)]


class _WakeupUnion(ctypes.Union):
    _fields_ = [("wakeup_events", ctypes.c_uint32), ("wakeup_watermark", ctypes.c_uint32)]


class _Config1Union(ctypes.Union):
    _fields_ = [
        ("bp_addr", ctypes.c_uint64),
        ("kprobe_func", ctypes.c_uint64),
        ("uprobe_path", ctypes.c_uint64),
        ("config1", ctypes.c_uint64),
    ]


class _Config2Union(ctypes.Union):
    _fields_ = [
        ("bp_len", ctypes.c_uint64),
        ("kprobe_addr", ctypes.c_uint64),
        ("probe_offset", ctypes.c_uint64),
        ("config2", ctypes.c_uint64),
    ]


# The one-bit flags in declaration order; GCC on little-endian Linux allocates bitfields from the
# least significant bit, and ctypes follows the platform compiler, so `disabled` is bit 0.
_FLAG_BITS: list[tuple[str, int]] = [
    ("disabled", 1),
    ("inherit", 1),
    ("pinned", 1),
    ("exclusive", 1),
    ("exclude_user", 1),
    ("exclude_kernel", 1),
    ("exclude_hv", 1),
    ("exclude_idle", 1),
    ("mmap", 1),
    ("comm", 1),
    ("freq", 1),
    ("inherit_stat", 1),
    ("enable_on_exec", 1),
    ("task", 1),
    ("watermark", 1),
    ("precise_ip", 2),
    ("mmap_data", 1),
    ("sample_id_all", 1),
    ("exclude_host", 1),
    ("exclude_guest", 1),
    ("exclude_callchain_kernel", 1),
    ("exclude_callchain_user", 1),
    ("mmap2", 1),
    ("comm_exec", 1),
    ("use_clockid", 1),
    ("context_switch", 1),
    ("write_backward", 1),
    ("namespaces", 1),
    ("ksymbol", 1),
    ("bpf_event", 1),
    ("aux_output", 1),
    ("cgroup", 1),
    ("text_poke", 1),
    ("build_id", 1),
    ("inherit_thread", 1),
    ("remove_on_exec", 1),
    ("sigtrap", 1),
    ("reserved_1", 26),
]


class PerfEventAttr(ctypes.Structure):
    """struct perf_event_attr up to config3 (PERF_ATTR_SIZE_VER8, 136 bytes).

    Kernels older than the struct accept it as long as the fields they do not know are zero
    (the kernel checks the tail and answers E2BIG otherwise).
    """

    _anonymous_ = ("_sample", "_wakeup", "_cfg1", "_cfg2")
    _fields_ = [
        ("type", ctypes.c_uint32),
        ("size", ctypes.c_uint32),
        ("config", ctypes.c_uint64),
        ("_sample", _SampleUnion),
        ("sample_type", ctypes.c_uint64),
        ("read_format", ctypes.c_uint64),
        *[(name, ctypes.c_uint64, bits) for name, bits in _FLAG_BITS],
        ("_wakeup", _WakeupUnion),
        ("bp_type", ctypes.c_uint32),
        ("_cfg1", _Config1Union),
        ("_cfg2", _Config2Union),
        ("branch_sample_type", ctypes.c_uint64),
        ("sample_regs_user", ctypes.c_uint64),
        ("sample_stack_user", ctypes.c_uint32),
        ("clockid", ctypes.c_int32),
        ("sample_regs_intr", ctypes.c_uint64),
        ("aux_watermark", ctypes.c_uint32),
        ("sample_max_stack", ctypes.c_uint16),
        ("reserved_2", ctypes.c_uint16),
        ("aux_sample_size", ctypes.c_uint32),
        # aux_action (6.13+): three control bits in what used to be __reserved_3.
        ("aux_start_paused", ctypes.c_uint32, 1),
        ("aux_pause", ctypes.c_uint32, 1),
        ("aux_resume", ctypes.c_uint32, 1),
        ("reserved_3", ctypes.c_uint32, 29),
        ("sig_data", ctypes.c_uint64),
        ("config3", ctypes.c_uint64),
    ]


PERF_ATTR_SIZE = ctypes.sizeof(PerfEventAttr)
assert PERF_ATTR_SIZE == PERF_ATTR_SIZE_VER8, PERF_ATTR_SIZE


def new_attr(type_: int, config: int, *, config1: int = 0, config2: int = 0) -> PerfEventAttr:
    """A zeroed attr with type, config and size filled in."""
    attr = PerfEventAttr()
    attr.type = type_
    attr.size = PERF_ATTR_SIZE
    attr.config = config
    attr.config1 = config1
    attr.config2 = config2
    return attr


def syscall_number(machine: str | None = None) -> int:
    """The perf_event_open syscall number for this (or the named) architecture."""
    machine = machine or platform.machine()
    try:
        return _SYSCALL_NUMBERS[machine.lower()]
    except KeyError:
        raise OSError(f"perf_event_open: unknown syscall number on {machine}") from None


_libc: Any = None


def _syscall() -> Any:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
    return _libc.syscall


def perf_event_open(
    attr: PerfEventAttr, pid: int, cpu: int, group_fd: int = -1, flags: int = PERF_FLAG_FD_CLOEXEC
) -> int:
    """perf_event_open(2): return a new fd, or raise OSError carrying the kernel's errno.

    pid=0 measures the calling thread, pid=tid another thread; cpu=-1 follows it on any CPU.
    """
    fd = _syscall()(
        ctypes.c_long(syscall_number()),
        ctypes.byref(attr),
        ctypes.c_int(pid),
        ctypes.c_int(cpu),
        ctypes.c_int(group_fd),
        ctypes.c_ulong(flags),
    )
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"perf_event_open: {os.strerror(err)}")
    return int(fd)


def ioctl_enable(fd: int, group: bool = False) -> None:
    """Start counting. On a group's leader, the leader alone is enough and is what to use: the members are
    opened enabled and the kernel schedules them only with their leader, so the whole group counts.
    ``group`` (``PERF_IOC_FLAG_GROUP``) toggles every member too; but members switched off that way and
    back on while their thread runs resume only at its next context switch (kernel 6.18: after one
    disable and enable, a member cpu-clock missed 30-99% of each later stretch), so it is not used."""
    fcntl.ioctl(fd, PERF_EVENT_IOC_ENABLE, PERF_IOC_FLAG_GROUP if group else 0)


def ioctl_disable(fd: int, group: bool = False) -> None:
    """Stop counting (on a leader: the whole group, see :func:`ioctl_enable`); the counts stay readable."""
    fcntl.ioctl(fd, PERF_EVENT_IOC_DISABLE, PERF_IOC_FLAG_GROUP if group else 0)


def ioctl_reset(fd: int, group: bool = True) -> None:
    """Zero the counts (time_enabled/time_running are not reset by the kernel)."""
    fcntl.ioctl(fd, PERF_EVENT_IOC_RESET, PERF_IOC_FLAG_GROUP if group else 0)
