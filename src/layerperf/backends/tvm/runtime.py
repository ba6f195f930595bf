"""Whether TVM is here: its version, the FFI it runs on, why not and how to install it.

Imports no TVM at the top: ``availability()`` is what `layerperf backends` calls on every machine.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

from layerperf.backends.base import Availability
from layerperf.errors import MissingDependency

# The versions this backend was written and tested against. apache-tvm-ffi 0.1.15.post2 (what pip
# picks by default for apache-tvm 0.27) segfaults in MetaSchedule's ToJSONGraph when a tuning
# database is written; 0.1.14.post1 works.
TVM_VERSION = "0.27.0.post1"
FFI_VERSION = "0.1.14.post1"
BAD_FFI = {"0.1.15.post2": "segfaults while writing a MetaSchedule database"}
INSTALL = (f"pip install 'layerperf[tvm]' (make setup installs it; or: pip install apache-tvm=={TVM_VERSION} "
           f"apache-tvm-ffi=={FFI_VERSION} psutil cloudpickle xgboost-cpu)")
# What MetaSchedule imports when it tunes (not needed to compile or run untuned builds).
TUNING_MODULES = ("psutil", "cloudpickle", "xgboost")


def _dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def versions() -> dict[str, str | None]:
    """The installed apache-tvm and apache-tvm-ffi versions (None: not installed); no TVM import."""
    return {"tvm": _dist_version("apache-tvm"), "tvm_ffi": _dist_version("apache-tvm-ffi")}


def availability() -> Availability:
    """Whether ``import tvm`` works here, TVM's version, or why not with the install line."""
    try:
        tvm = importlib.import_module("tvm")
    except ImportError as exc:
        return Availability(False, None, f"tvm does not import ({exc}); install it with: {INSTALL}")
    version = str(getattr(tvm, "__version__", versions()["tvm"] or "unknown"))
    ffi = versions()["tvm_ffi"]
    if ffi in BAD_FFI:
        return Availability(True, version, f"apache-tvm-ffi {ffi} {BAD_FFI[ffi]}: pin apache-tvm-ffi=={FFI_VERSION}")
    return Availability(True, version)


def require_tvm() -> ModuleType:
    """The ``tvm`` module, or MissingDependency saying how to install it."""
    try:
        return importlib.import_module("tvm")
    except ImportError:
        raise MissingDependency("apache-tvm (for --backend tvm)", INSTALL) from None


def require_tuning() -> None:
    """MissingDependency naming what MetaSchedule needs and is not installed."""
    missing = [m for m in TUNING_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingDependency(", ".join(missing) + " (for MetaSchedule tuning)",
                                "pip install psutil cloudpickle xgboost-cpu")


def version_key() -> str:
    """TVM's and its FFI's versions as one string, for cache keys."""
    v = versions()
    return f"tvm-{v['tvm']}_ffi-{v['tvm_ffi']}"


@contextmanager
def kept_affinity() -> Iterator[None]:
    """Restore the calling thread's CPU affinity after the block: starting TVM's thread pool pins the
    thread that starts it (to CPU 0), which would leave the rest of the process on one core."""
    getter = getattr(os, "sched_getaffinity", None)
    before = getter(0) if getter else None
    try:
        yield
    finally:
        if before is not None and os.sched_getaffinity(0) != before:
            os.sched_setaffinity(0, before)


def set_threads(threads: int) -> int:
    """Make TVM's runtime use ``threads`` worker threads (0: keep TVM_NUM_THREADS or TVM's default);
    returns the number its pool has.

    The count is read from TVM_NUM_THREADS when the pool is made (at the first parallel kernel, or
    here): set before that, it holds, and nothing is pinned. ``runtime.config_threadpool``, TVM's
    way to change a running pool, pins the calling thread to CPU 0 and then reports 1 thread (0.27,
    2 vCPUs): it is not used; a pool made earlier with another count keeps it (the caller compares)."""
    tvm = require_tvm()
    if threads > 0:
        os.environ["TVM_NUM_THREADS"] = str(threads)
    with kept_affinity():
        return int(tvm.get_global_func("runtime.NumThreads")())
