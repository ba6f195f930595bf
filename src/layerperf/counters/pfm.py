"""libpfm4 through ctypes: encode PMU event strings into perf_event_attr, and list this CPU's events.

Structure layouts follow perfmon/pfmlib.h and perfmon/pfmlib_perf_event.h (LP64). libpfm4 checks the
`size` member of each struct against the sizes it knows, so every struct we pass sets it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
from dataclasses import dataclass
from typing import Any

from layerperf.counters import abi
from layerperf.counters.event import EventSpec
from layerperf.errors import CounterError, MissingDependency

PFM_SUCCESS = 0
PFM_ERR_NOTSUPP = -1
PFM_ERR_INVAL = -2
PFM_ERR_NOINIT = -3
PFM_ERR_NOTFOUND = -4

# privilege level masks: PLM0 is the kernel, PLM3 user space, PLMH the hypervisor
PFM_PLM0 = 0x01
PFM_PLM3 = 0x08
PFM_PLMH = 0x10

# pfm_os_t: which attribute set the encoder understands
PFM_OS_NONE = 0
PFM_OS_PERF_EVENT = 1  # PMU attributes plus u/k/h/mg/mh
PFM_OS_PERF_EVENT_EXT = 2  # also sampling period/freq/precise/... (not wanted for counting)

PFM_PMU_TYPE_CORE = 1
PFM_PMU_TYPE_UNCORE = 2
PFM_PMU_TYPE_OS_GENERIC = 3
_PMU_ID_LIMIT = 4096  # pfm_pmu_t is an enum (517 entries in 4.13); past its end libpfm says INVAL

_SOFTWARE_KERNEL_ONLY = {
    abi.PERF_COUNT_SW_CONTEXT_SWITCHES,
    abi.PERF_COUNT_SW_CPU_MIGRATIONS,
    abi.PERF_COUNT_SW_CGROUP_SWITCHES,
}


class PfmEncodeArg(ctypes.Structure):
    """pfm_perf_encode_arg_t."""

    _fields_ = [
        ("attr", ctypes.POINTER(abi.PerfEventAttr)),
        ("fstr", ctypes.POINTER(ctypes.c_void_p)),  # char **: libpfm4 mallocs the string
        ("size", ctypes.c_size_t),
        ("idx", ctypes.c_int),
        ("cpu", ctypes.c_int),
        ("flags", ctypes.c_int),
        ("pad0", ctypes.c_int),
    ]


class PfmPmuInfo(ctypes.Structure):
    """pfm_pmu_info_t."""

    _fields_ = [
        ("name", ctypes.c_char_p),
        ("desc", ctypes.c_char_p),
        ("size", ctypes.c_size_t),
        ("pmu", ctypes.c_int),
        ("type", ctypes.c_int),
        ("nevents", ctypes.c_int),
        ("first_event", ctypes.c_int),
        ("max_encoding", ctypes.c_int),
        ("num_cntrs", ctypes.c_int),
        ("num_fixed_cntrs", ctypes.c_int),
        ("is_present", ctypes.c_uint, 1),
        ("is_dfl", ctypes.c_uint, 1),
        ("reserved_bits", ctypes.c_uint, 30),
    ]


class PfmEventInfo(ctypes.Structure):
    """pfm_event_info_t."""

    _fields_ = [
        ("name", ctypes.c_char_p),
        ("desc", ctypes.c_char_p),
        ("equiv", ctypes.c_char_p),
        ("size", ctypes.c_size_t),
        ("code", ctypes.c_uint64),
        ("pmu", ctypes.c_int),
        ("dtype", ctypes.c_int),
        ("idx", ctypes.c_int),
        ("nattrs", ctypes.c_int),
        ("reserved", ctypes.c_int),
        ("flags", ctypes.c_uint),
    ]


class PfmNotFound(CounterError):
    """libpfm4 knows no event by that name."""


@dataclass(frozen=True, slots=True)
class PmuInfo:
    """One PMU libpfm4 reports as present on this machine."""

    name: str
    desc: str
    pmu_type: int
    nevents: int
    num_counters: int
    num_fixed_counters: int


@dataclass(frozen=True, slots=True)
class PfmEvent:
    """One event of an active PMU, named `pmu::event` as libpfm4 accepts it."""

    name: str
    desc: str
    pmu: str


_lock = threading.RLock()  # libpfm4 keeps global state; one caller at a time
_lib: Any = None
_libc: Any = None


def _find_library() -> str | None:
    return ctypes.util.find_library("pfm")


def _load() -> Any:
    """Load and initialize libpfm4 once; MissingDependency if it is not installed."""
    global _lib, _libc
    with _lock:
        if _lib is not None:
            return _lib
        path = _find_library()
        if path is None:
            raise MissingDependency("libpfm4", "apt-get install libpfm4")
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            raise MissingDependency("libpfm4", "apt-get install libpfm4") from None
        _declare(lib)
        ret = lib.pfm_initialize()
        if ret != PFM_SUCCESS:
            raise CounterError(f"libpfm4 failed to initialize: {_strerror(lib, ret)}")
        _libc = ctypes.CDLL(None)
        _libc.free.argtypes = [ctypes.c_void_p]
        _lib = lib
        return lib


def _declare(lib: Any) -> None:
    lib.pfm_initialize.restype = ctypes.c_int
    lib.pfm_strerror.restype = ctypes.c_char_p
    lib.pfm_strerror.argtypes = [ctypes.c_int]
    lib.pfm_get_os_event_encoding.restype = ctypes.c_int
    lib.pfm_get_os_event_encoding.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
    lib.pfm_get_pmu_info.restype = ctypes.c_int
    lib.pfm_get_pmu_info.argtypes = [ctypes.c_int, ctypes.POINTER(PfmPmuInfo)]
    lib.pfm_get_event_next.restype = ctypes.c_int
    lib.pfm_get_event_next.argtypes = [ctypes.c_int]
    lib.pfm_get_event_info.restype = ctypes.c_int
    lib.pfm_get_event_info.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(PfmEventInfo)]


def _strerror(lib: Any, code: int) -> str:
    msg = lib.pfm_strerror(code)
    return msg.decode() if msg else f"libpfm4 error {code}"


def available() -> bool:
    """Whether libpfm4 can be loaded."""
    try:
        _load()
    except MissingDependency:
        return False
    return True


def encode(event: str, default_plm: int = PFM_PLM3) -> tuple[abi.PerfEventAttr, str]:
    """Encode `event` with libpfm4: the perf_event_attr it fills and its fully qualified name.

    default_plm is the privilege-level mask libpfm4 applies when the string has no :u/:k modifier.
    """
    lib = _load()
    attr = abi.new_attr(0, 0)
    fstr = ctypes.c_void_p()
    arg = PfmEncodeArg(attr=ctypes.pointer(attr), fstr=ctypes.pointer(fstr), size=ctypes.sizeof(PfmEncodeArg))
    # PFM_OS_PERF_EVENT rather than _EXT: the extended set adds sampling attributes (period, freq,
    # precise), which mean nothing for counting.
    with _lock:
        ret = lib.pfm_get_os_event_encoding(event.encode(), default_plm, PFM_OS_PERF_EVENT, ctypes.byref(arg))
    if ret == PFM_ERR_NOTFOUND:
        raise PfmNotFound(f"libpfm4 cannot encode {event!r}: {_strerror(lib, ret)}")
    if ret != PFM_SUCCESS:
        raise CounterError(f"libpfm4 cannot encode {event!r}: {_strerror(lib, ret)}")
    qualified = event
    if fstr.value:
        qualified = ctypes.string_at(fstr.value).decode()
        _libc.free(fstr)  # libpfm4 mallocs fstr and leaves freeing it to the caller
    return attr, qualified


def _modifiers(event: str, attr: abi.PerfEventAttr) -> str:
    # Encoding again with another default privilege mask tells an explicit :u/:k (the exclude bits
    # do not move) from none at all (they follow the default), which leaves the choice to CounterSet.
    other, _ = encode(event, PFM_PLM0)
    if (other.exclude_user, other.exclude_kernel) != (attr.exclude_user, attr.exclude_kernel):
        return ""
    return ("" if attr.exclude_user else "u") + ("" if attr.exclude_kernel else "k")


def resolve(event: str) -> EventSpec:
    """An EventSpec for a libpfm4 event string (e.g. `perf::PERF_COUNT_HW_CPU_CYCLES`)."""
    attr, _ = encode(event)
    kernel_only = attr.type == abi.PERF_TYPE_SOFTWARE and attr.config in _SOFTWARE_KERNEL_ONLY
    return EventSpec(
        name=event,
        type=attr.type,
        config=attr.config,
        config1=attr.config1,
        config2=attr.config2,
        kernel_only=kernel_only,
        modifiers=_modifiers(event, attr),
    )


def pmus(*, present_only: bool = True) -> list[PmuInfo]:
    """The PMUs libpfm4 supports (only those detected on this machine by default)."""
    lib = _load()
    found = []
    for pmu_id in range(_PMU_ID_LIMIT):
        info = PfmPmuInfo(size=ctypes.sizeof(PfmPmuInfo))
        if lib.pfm_get_pmu_info(pmu_id, ctypes.byref(info)) != PFM_SUCCESS:
            continue
        if present_only and not info.is_present:
            continue
        found.append(
            PmuInfo(
                name=(info.name or b"").decode(),
                desc=(info.desc or b"").decode(),
                pmu_type=info.type,
                nevents=info.nevents,
                num_counters=info.num_cntrs,
                num_fixed_counters=info.num_fixed_cntrs,
            )
        )
    return found


def _pmu_events(lib: Any, first: int) -> list[tuple[str, str]]:
    # Event indexes are opaque and not contiguous: walk them with pfm_get_event_next.
    events = []
    idx = first
    while idx != -1:
        info = PfmEventInfo(size=ctypes.sizeof(PfmEventInfo))
        if lib.pfm_get_event_info(idx, PFM_OS_PERF_EVENT, ctypes.byref(info)) == PFM_SUCCESS:
            events.append(((info.name or b"").decode(), (info.desc or b"").decode()))
        idx = lib.pfm_get_event_next(idx)
    return events


def event_list() -> list[PfmEvent]:
    """Every event of the PMUs libpfm4 detects on this machine, as `pmu::event` names."""
    lib = _load()
    out: list[PfmEvent] = []
    for pmu_id in range(_PMU_ID_LIMIT):
        info = PfmPmuInfo(size=ctypes.sizeof(PfmPmuInfo))
        if lib.pfm_get_pmu_info(pmu_id, ctypes.byref(info)) != PFM_SUCCESS or not info.is_present:
            continue
        pmu_name = (info.name or b"").decode()
        for name, desc in _pmu_events(lib, info.first_event):
            out.append(PfmEvent(name=f"{pmu_name}::{name}", desc=desc, pmu=pmu_name))
    return out


def core_counter_budget() -> int | None:
    """General-purpose counters of the detected core PMU, or None when libpfm4 knows none."""
    try:
        found = pmus()
    except MissingDependency:
        return None
    cores = [p for p in found if p.pmu_type == PFM_PMU_TYPE_CORE and p.num_counters > 0]
    return cores[0].num_counters if cores else None
