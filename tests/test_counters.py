"""Tests of layerperf.counters: ABI layout, event names, real software counts, permissions, scheduling."""

from __future__ import annotations

import ctypes
import errno
import json
import mmap
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layerperf.counters import (
    CounterSet,
    EventSpec,
    Privilege,
    Reading,
    abi,
    current_privilege,
    derived_metrics,
    list_threads,
    parse_perf_config,
    pfm,
    probe_events,
    resolve,
    schedule,
)
from layerperf.counters.schedule import group_fits
from layerperf.errors import CounterError, InputError, MissingDependency

PAGE = mmap.PAGESIZE
TOUCH_BYTES = 64 << 20
TOUCH_PAGES = TOUCH_BYTES // PAGE


def touch_fresh_memory(nbytes: int = TOUCH_BYTES) -> int:
    """Fault in nbytes of new anonymous memory one page at a time; returns the number of pages."""
    mem = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        if hasattr(mmap, "MADV_NOHUGEPAGE"):
            mem.madvise(mmap.MADV_NOHUGEPAGE)  # one fault per 4 KiB page, not per 2 MiB
        view = memoryview(mem)
        for off in range(0, nbytes, PAGE):
            view[off] = 1
        view.release()
    finally:
        mem.close()
    return nbytes // PAGE


def spin_cpu(seconds: float) -> None:
    """Burn `seconds` of this thread's CPU time."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def cycles_opens() -> bool:
    try:
        CounterSet(["cycles"], threads="self").open().close()
    except CounterError:
        return False
    return True


# --- ABI ---------------------------------------------------------------------------------------------


def test_attr_size_and_field_offsets_match_the_uapi_header() -> None:
    attr_t = abi.PerfEventAttr
    assert ctypes.sizeof(attr_t) == abi.PERF_ATTR_SIZE_VER8 == 136
    offsets = {
        "type": 0,
        "size": 4,
        "config": 8,
        "sample_period": 16,
        "sample_type": 24,
        "read_format": 32,
        "wakeup_events": 48,
        "bp_type": 52,
        "config1": 56,
        "config2": 64,
        "branch_sample_type": 72,
        "sample_regs_user": 80,
        "sample_stack_user": 88,
        "clockid": 92,
        "sample_regs_intr": 96,
        "aux_watermark": 104,
        "sample_max_stack": 108,
        "aux_sample_size": 112,
        "sig_data": 120,
        "config3": 128,
    }
    attr = attr_t()
    base = ctypes.addressof(attr)
    for name, want in offsets.items():
        owner = attr
        for union in ("_sample", "_wakeup", "_cfg1", "_cfg2"):
            if hasattr(type(getattr(attr, union)), name):
                owner = getattr(attr, union)
        field_addr = ctypes.addressof(owner) + getattr(type(owner), name).offset
        assert field_addr - base == want, name
    # The versioned sizes end exactly where the next field starts.
    assert offsets["config2"] == abi.PERF_ATTR_SIZE_VER1 - 8
    assert offsets["sig_data"] == abi.PERF_ATTR_SIZE_VER7 - 8


@pytest.mark.parametrize(
    ("flag", "bit"),
    [
        ("disabled", 0),
        ("inherit", 1),
        ("exclude_user", 4),
        ("exclude_kernel", 5),
        ("exclude_hv", 6),
        ("exclude_idle", 7),
        ("enable_on_exec", 12),
        ("exclude_host", 19),
        ("exclude_guest", 20),
        ("inherit_thread", 35),
        ("remove_on_exec", 36),
        ("sigtrap", 37),
    ],
)
def test_flag_bitfields_sit_at_their_kernel_bit(flag: str, bit: int) -> None:
    attr = abi.PerfEventAttr()
    setattr(attr, flag, 1)
    word = ctypes.c_uint64.from_buffer(attr, 40).value
    assert word == 1 << bit


def test_precise_ip_is_two_bits_at_15() -> None:
    attr = abi.PerfEventAttr()
    attr.precise_ip = 3
    assert ctypes.c_uint64.from_buffer(attr, 40).value == 3 << 15


def test_syscall_numbers_and_ioctls() -> None:
    assert abi.syscall_number("x86_64") == 298
    assert abi.syscall_number("aarch64") == 241
    assert (abi.PERF_EVENT_IOC_ENABLE, abi.PERF_EVENT_IOC_DISABLE, abi.PERF_EVENT_IOC_RESET) == (
        0x2400,
        0x2401,
        0x2403,
    )
    assert abi.PERF_IOC_FLAG_GROUP == 1
    read_format = (
        abi.PERF_FORMAT_GROUP | abi.PERF_FORMAT_TOTAL_TIME_ENABLED | abi.PERF_FORMAT_TOTAL_TIME_RUNNING
    )
    assert read_format == 0b1011


def test_perf_event_open_raises_oserror_with_the_kernel_errno() -> None:
    attr = abi.new_attr(abi.PERF_TYPE_SOFTWARE, 10_000)  # no such software event
    attr.exclude_kernel = 1
    with pytest.raises(OSError) as info:
        abi.perf_event_open(attr, 0, -1)
    assert info.value.errno in (errno.ENOENT, errno.EINVAL, errno.EOPNOTSUPP)


# --- event names -------------------------------------------------------------------------------------

# (name, type, config) written from include/uapi/linux/perf_event.h
UAPI = [
    ("cycles", 0, 0),
    ("cpu-cycles", 0, 0),
    ("instructions", 0, 1),
    ("cache-references", 0, 2),
    ("cache-misses", 0, 3),
    ("branches", 0, 4),
    ("branch-instructions", 0, 4),
    ("branch-misses", 0, 5),
    ("bus-cycles", 0, 6),
    ("stalled-cycles-frontend", 0, 7),
    ("idle-cycles-frontend", 0, 7),
    ("stalled-cycles-backend", 0, 8),
    ("idle-cycles-backend", 0, 8),
    ("ref-cycles", 0, 9),
    ("L1-dcache-loads", 3, 0 | 0 << 8 | 0 << 16),
    ("L1-dcache-load-misses", 3, 0 | 0 << 8 | 1 << 16),
    ("L1-dcache-stores", 3, 0 | 1 << 8 | 0 << 16),
    ("L1-dcache-store-misses", 3, 0 | 1 << 8 | 1 << 16),
    ("L1-icache-loads", 3, 1 | 0 << 8 | 0 << 16),
    ("L1-icache-load-misses", 3, 1 | 0 << 8 | 1 << 16),
    ("LLC-loads", 3, 2 | 0 << 8 | 0 << 16),
    ("LLC-load-misses", 3, 2 | 0 << 8 | 1 << 16),
    ("LLC-stores", 3, 2 | 1 << 8 | 0 << 16),
    ("LLC-store-misses", 3, 2 | 1 << 8 | 1 << 16),
    ("dTLB-loads", 3, 3 | 0 << 8 | 0 << 16),
    ("dTLB-load-misses", 3, 3 | 0 << 8 | 1 << 16),
    ("dTLB-stores", 3, 3 | 1 << 8 | 0 << 16),
    ("dTLB-store-misses", 3, 3 | 1 << 8 | 1 << 16),
    ("iTLB-loads", 3, 4 | 0 << 8 | 0 << 16),
    ("iTLB-load-misses", 3, 4 | 0 << 8 | 1 << 16),
    ("branch-loads", 3, 5 | 0 << 8 | 0 << 16),
    ("branch-load-misses", 3, 5 | 0 << 8 | 1 << 16),
    ("L1-dcache-prefetches", 3, 0 | 2 << 8 | 0 << 16),
    ("LLC-prefetch-misses", 3, 2 | 2 << 8 | 1 << 16),
    ("node-loads", 3, 6 | 0 << 8 | 0 << 16),
    ("node-load-misses", 3, 6 | 0 << 8 | 1 << 16),
    ("cpu-clock", 1, 0),
    ("task-clock", 1, 1),
    ("page-faults", 1, 2),
    ("faults", 1, 2),
    ("context-switches", 1, 3),
    ("cs", 1, 3),
    ("cpu-migrations", 1, 4),
    ("migrations", 1, 4),
    ("minor-faults", 1, 5),
    ("major-faults", 1, 6),
    ("alignment-faults", 1, 7),
    ("emulation-faults", 1, 8),
    ("cgroup-switches", 1, 11),
]


@pytest.mark.parametrize(("name", "type_", "config"), UAPI)
def test_perf_names_encode_to_the_kernel_abi(name: str, type_: int, config: int) -> None:
    spec = resolve(name)
    assert (spec.type, spec.config, spec.config1, spec.config2) == (type_, config, 0, 0)
    assert spec.name == name
    assert spec.kernel_only == (type_ == 1 and config in (3, 4, 11))
    assert spec.uses_pmu_counter == (type_ != 1)


def test_raw_codes_and_modifiers() -> None:
    assert resolve("r1a8").key == (abi.PERF_TYPE_RAW, 0x1A8, 0, 0)
    spec = resolve("r00c0:u")
    assert (spec.type, spec.config, spec.modifiers) == (4, 0xC0, "u")
    assert resolve("cycles:k").modifiers == "k"
    assert resolve("instructions:uk").modifiers == "uk"
    assert resolve("LLC-loads").key == resolve("llc-loads").key


@pytest.mark.parametrize(
    ("typo", "suggestion"),
    [("cylces", "cycles"), ("L1-dcache-load-mises", "L1-dcache-load-misses"), ("page-fault", "page-faults")],
)
def test_unknown_names_suggest_the_closest(typo: str, suggestion: str) -> None:
    with pytest.raises(CounterError) as info:
        resolve(typo)
    assert "unknown perf event" in info.value.message
    assert suggestion in (info.value.hint or "")


def test_empty_event_name() -> None:
    with pytest.raises(CounterError):
        resolve("  ")


def test_missing_libpfm_only_matters_for_libpfm_strings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pfm, "_lib", None)
    monkeypatch.setattr(pfm, "_find_library", lambda: None)
    assert resolve("cycles").key == (0, 0, 0, 0)
    with pytest.raises(MissingDependency) as info:
        resolve("perf::PERF_COUNT_HW_CPU_CYCLES")
    assert "libpfm4" in str(info.value) and "apt-get install libpfm4" in str(info.value)
    with pytest.raises(CounterError) as typo:
        resolve("cylces")
    assert not isinstance(typo.value, MissingDependency)
    assert "cycles" in str(typo.value)


# --- counting for real (software events) ---------------------------------------------------------------


def test_task_clock_grows_while_spinning() -> None:
    with CounterSet(["task-clock"], threads="self") as cs:
        cs.enable()
        before = cs.read()
        spin_cpu(0.03)
        delta = cs.read() - before
    assert delta["task-clock"] >= 0.8 * 0.03e9
    assert delta.fraction_counted == 1.0


def test_page_faults_counted_when_touching_fresh_memory() -> None:
    with CounterSet(["page-faults", "minor-faults", "major-faults"], threads="self") as cs:
        cs.enable()
        before = cs.read()
        pages = touch_fresh_memory()
        delta = cs.read() - before
    assert pages * 0.95 <= delta["page-faults"] <= pages * 2
    assert delta["minor-faults"] >= pages * 0.95
    assert delta["page-faults"] == delta["minor-faults"] + delta["major-faults"]


def test_disabled_counters_do_not_count() -> None:
    with CounterSet(["page-faults"], threads="self") as cs:
        cs.enable()
        cs.disable()
        before = cs.read()
        touch_fresh_memory(4 << 20)
        assert (cs.read() - before)["page-faults"] == 0


def test_every_member_counts_again_after_disable_and_enable() -> None:
    # toggled with PERF_IOC_FLAG_GROUP, the members came back only at the thread's next context switch:
    # cpu-clock then missed 30-99% of each stretch after the first, page-faults all of them
    with CounterSet(["task-clock", "cpu-clock"], threads="self") as cs:
        for _ in range(5):  # short stretches: a context switch within one would bring the members back
            cs.enable()
            before = cs.read()
            spin_cpu(0.01)
            delta = cs.read() - before
            cs.disable()
            # both clocks count this thread's CPU time while the group runs (load makes no difference)
            assert delta["cpu-clock"] >= 0.95 * delta["task-clock"] > 0


def test_sampled_group_members_count_in_every_run() -> None:
    from layerperf.counters.sampling import SampledGroup

    group = SampledGroup([resolve("task-clock"), resolve("cpu-clock"), resolve("page-faults")],
                         [threading.get_native_id()], 1_000_000)
    try:
        for _ in range(3):  # as the in-situ route samples its runs: enabled, marked, run, marked, disabled
            group.enable()
            group.mark(time.time_ns())
            spin_cpu(0.02)
            pages = touch_fresh_memory()
            group.mark(time.time_ns())
            group.disable()
            (got,) = group.take().values()
            task, cpu, faults = (b - a for a, b in zip(got.counts[0], got.counts[-1], strict=True))
            assert cpu >= 0.95 * task > 0
            assert faults >= 0.95 * pages
    finally:
        group.close()


def _worker(ready: threading.Event, go: threading.Event, work: Callable[[], object]) -> threading.Thread:
    def run() -> None:
        ready.set()
        go.wait(10)
        work()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(10)
    return thread


def test_counts_of_other_threads_are_summed_and_survive_their_exit() -> None:
    ready, go = threading.Event(), threading.Event()
    worker = _worker(ready, go, touch_fresh_memory)
    with (
        CounterSet(["page-faults", "task-clock"]) as everyone,
        CounterSet(["page-faults"], threads="self") as me,
    ):
        assert worker.native_id in everyone.threads
        assert me.threads == (threading.get_native_id(),)
        everyone.enable()
        me.enable()
        all_before, me_before = everyone.read(), me.read()
        go.set()
        worker.join(30)
        all_delta, me_delta = everyone.read() - all_before, me.read() - me_before
    # The worker has exited by the second read; its final counts are still in the sum.
    assert all_delta["page-faults"] >= TOUCH_PAGES * 0.95
    assert me_delta["page-faults"] < TOUCH_PAGES * 0.1
    assert all_delta["task-clock"] > 0


def test_refresh_threads_picks_up_a_new_thread() -> None:
    with CounterSet(["page-faults"]) as cs:
        cs.enable()
        ready, go = threading.Event(), threading.Event()
        worker = _worker(ready, go, touch_fresh_memory)
        assert worker.native_id not in cs.threads
        assert cs.refresh_threads() >= 1
        assert worker.native_id in cs.threads
        assert cs.refresh_threads() == 0
        before = cs.read()
        go.set()
        worker.join(30)
        delta = cs.read() - before
    assert delta["page-faults"] >= TOUCH_PAGES * 0.95


def test_readings_are_monotone() -> None:
    with CounterSet(["task-clock", "page-faults", "cpu-clock"]) as cs:
        cs.enable()
        previous = cs.read()
        chunks = []
        for _ in range(200):
            chunks.append(bytearray(64 << 10))
            current = cs.read()
            delta = current - previous
            assert all(v >= 0 for v in delta.values)
            assert delta.time_enabled >= 0 and delta.time_running >= 0
            previous = current


def test_reading_api_on_real_counts() -> None:
    with CounterSet(["task-clock", "page-faults"], threads="self") as cs:
        cs.enable()
        before = cs.read()
        spin_cpu(0.005)
        after = cs.read()
    delta = after - before
    assert isinstance(delta, Reading)
    assert delta.names == ("task-clock", "page-faults")
    assert delta.as_dict() == {"task-clock": delta.values[0], "page-faults": delta.values[1]}
    assert delta.scaled() == {k: float(v) for k, v in delta.as_dict().items()}
    with pytest.raises(KeyError):
        delta["cycles"]


def test_scaling_arithmetic_for_a_multiplexed_group() -> None:
    # Software events never multiplex, so this checks the arithmetic on stated numbers.
    half = Reading(("x",), (100,), time_enabled=2000, time_running=1000)
    assert half.fraction_counted == 0.5
    assert half.scaled() == {"x": 200.0}
    never = Reading(("x",), (0,), time_enabled=2000, time_running=0)
    assert never.fraction_counted == 0.0
    assert never.scaled()["x"] != never.scaled()["x"]  # NaN, not a made-up zero
    with pytest.raises(ValueError):
        half - Reading(("y",), (1,), 1, 1)


def test_kernel_only_event_counts_with_kernel_included_when_permitted() -> None:
    if not current_privilege().kernel_allowed:
        pytest.skip("kernel-mode counting is not permitted here")
    with CounterSet(["context-switches", "task-clock"], threads="self") as cs:
        cs.enable()
        before = cs.read()
        for _ in range(5):
            time.sleep(0.002)
        delta = cs.read() - before
    assert delta["context-switches"] >= 5


def test_libpfm_string_counts_like_the_perf_name() -> None:
    if not pfm.available():
        pytest.skip("libpfm4 is not installed")
    with CounterSet(["perf::PERF_COUNT_SW_PAGE_FAULTS", "page-faults"], threads="self") as cs:
        cs.enable()
        before = cs.read()
        touch_fresh_memory(8 << 20)
        delta = cs.read() - before
    assert delta["perf::PERF_COUNT_SW_PAGE_FAULTS"] == delta["page-faults"] >= (8 << 20) // PAGE * 0.95


def test_counterset_argument_errors() -> None:
    with pytest.raises(CounterError):
        CounterSet([])
    with pytest.raises(CounterError):
        CounterSet(["task-clock", "task-clock"])
    cs = CounterSet(["task-clock"], threads="self")
    with pytest.raises(CounterError):
        cs.enable()  # not open
    with pytest.raises(CounterError):
        CounterSet(["task-clock"], threads=[2**22 + 12345]).open()
    with pytest.raises(CounterError):
        CounterSet(["task-clock"], threads="main").open()


def test_counters_see_onnxruntime_pool_threads() -> None:
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    import numpy as np
    from onnx import TensorProto, helper

    n = 512
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["c"])],
        "mm",
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [n, n]) for x in "ab"],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, [n, n])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    before_threads = set(list_threads())
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    pool = set(list_threads()) - before_threads
    feed = {"a": np.ones((n, n), np.float32), "b": np.ones((n, n), np.float32)}
    with CounterSet(["task-clock"]) as everyone, CounterSet(["task-clock"], threads="self") as me:
        assert pool <= set(everyone.threads)
        everyone.enable()
        me.enable()
        a0, m0 = everyone.read(), me.read()
        for _ in range(5):
            sess.run(None, feed)
        all_delta, me_delta = everyone.read() - a0, me.read() - m0
    assert all_delta["task-clock"] > me_delta["task-clock"] > 0


# --- no hardware PMU -------------------------------------------------------------------------------------


def test_hardware_event_without_pmu_is_a_clear_error_not_zero() -> None:
    if cycles_opens():
        pytest.skip("this machine exposes a hardware PMU")
    attr = abi.new_attr(abi.PERF_TYPE_HARDWARE, abi.PERF_COUNT_HW_CPU_CYCLES)
    attr.exclude_kernel = 1
    with pytest.raises(OSError) as raw:
        abi.perf_event_open(attr, 0, -1)
    assert raw.value.errno in (errno.ENOENT, errno.EOPNOTSUPP)
    for name in ("cycles", "dTLB-load-misses", "r00c0"):
        with pytest.raises(CounterError) as info:
            CounterSet([name], threads="self").open()
        assert "not supported" in info.value.message
        assert "no hardware PMU" in info.value.message


def test_probe_events_reports_each_known_event() -> None:
    results = {r.name: r for r in probe_events()}
    assert results["task-clock"].ok and results["task-clock"].reason == ""
    assert results["page-faults"].ok
    assert "cs" not in results  # aliases are not probed twice
    if not cycles_opens():
        assert not results["cycles"].ok
        assert "no hardware PMU" in results["cycles"].reason
    if current_privilege().kernel_allowed:
        assert results["context-switches"].ok
    else:
        assert "kernel" in results["context-switches"].reason


# --- permissions ---------------------------------------------------------------------------------------

UNPRIVILEGED = Privilege(paranoid=2, perfmon_capable=False)


def test_user_only_counting_is_allowed_at_paranoid_2() -> None:
    cs = CounterSet(["task-clock", "page-faults"], privilege=UNPRIVILEGED)
    assert cs.privilege.user_allowed and not cs.privilege.kernel_allowed


def test_include_kernel_refused_at_paranoid_2_without_privilege() -> None:
    with pytest.raises(CounterError) as info:
        CounterSet(["task-clock"], include_kernel=True, privilege=UNPRIVILEGED)
    assert "perf_event_paranoid=2" in info.value.message
    assert "sysctl -w kernel.perf_event_paranoid=1" in (info.value.hint or "")


@pytest.mark.parametrize("name", ["context-switches", "cpu-migrations", "cs"])
def test_kernel_only_events_refused_without_kernel_permission(name: str) -> None:
    with pytest.raises(CounterError) as info:
        CounterSet([name], privilege=UNPRIVILEGED)
    assert "kernel mode" in info.value.message
    assert "sysctl -w kernel.perf_event_paranoid=1" in (info.value.hint or "")


def test_kernel_only_events_refused_when_kernel_is_excluded() -> None:
    root_like = Privilege(paranoid=2, perfmon_capable=True)
    with pytest.raises(CounterError) as info:
        CounterSet(["context-switches"], include_kernel=False, privilege=root_like)
    assert "read 0" in info.value.message
    with pytest.raises(CounterError):
        CounterSet(["context-switches:u"], privilege=root_like)


def test_paranoid_3_refuses_everything_unprivileged() -> None:
    with pytest.raises(CounterError) as info:
        CounterSet(["task-clock"], privilege=Privilege(paranoid=3, perfmon_capable=False))
    assert "sysctl -w kernel.perf_event_paranoid=2" in (info.value.hint or "")
    CounterSet(["task-clock"], privilege=Privilege(paranoid=3, perfmon_capable=True))


def test_kernel_allowed_by_paranoid_1_or_capability() -> None:
    assert Privilege(1, False).kernel_allowed
    assert Privilege(2, True).kernel_allowed
    assert not Privilege(2, False).kernel_allowed
    CounterSet(["context-switches"], privilege=Privilege(1, False))


_UNPRIVILEGED_SCRIPT = textwrap.dedent(
    """
    import json, mmap, os, sys
    from layerperf.counters import CounterSet, Privilege, current_privilege
    from layerperf.counters import abi
    from layerperf.errors import CounterError

    if os.geteuid() == 0:
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)  # dropping every uid 0 also clears the capability sets
        except OSError as exc:
            print(json.dumps({"skip": f"cannot drop privileges: {exc}"}))
            sys.exit(0)
    out = {}
    priv = current_privilege()
    out["paranoid"], out["capable"] = priv.paranoid, priv.perfmon_capable

    def attempt(key, fn):
        try:
            out[key] = ["ok", fn()]
        except CounterError as exc:
            out[key] = ["error", exc.message, exc.hint]

    def user_faults():
        with CounterSet(["page-faults"]) as cs:
            cs.enable()
            before = cs.read()
            mem = mmap.mmap(-1, 8 << 20)
            mem.madvise(mmap.MADV_NOHUGEPAGE)
            for off in range(0, 8 << 20, mmap.PAGESIZE):
                mem[off] = 1
            return (cs.read() - before)["page-faults"]

    attempt("user", user_faults)
    attempt("kernel", lambda: CounterSet(["page-faults"], include_kernel=True).open().close())
    attempt("cs", lambda: CounterSet(["context-switches"]).open().close())
    # Claim a permission we lack: the kernel's EACCES must come back as the same clear error.
    lie = Privilege(paranoid=1, perfmon_capable=False)
    attempt("kernel_denied", lambda: CounterSet(["page-faults"], include_kernel=True, privilege=lie).open())
    attr = abi.new_attr(abi.PERF_TYPE_SOFTWARE, abi.PERF_COUNT_SW_PAGE_FAULTS)
    try:
        os.close(abi.perf_event_open(attr, 0, -1))  # exclude_kernel=0: the kernel's own verdict
        out["raw_kernel_errno"] = 0
    except OSError as exc:
        out["raw_kernel_errno"] = exc.errno
    print(json.dumps(out))
    """
)


def test_unprivileged_process_for_real(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", _UNPRIVILEGED_SCRIPT],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    if "skip" in out:
        pytest.skip(out["skip"])
    if out["capable"]:
        pytest.skip("the unprivileged process still holds CAP_PERFMON/CAP_SYS_ADMIN")
    paranoid = out["paranoid"]
    if paranoid >= 3:
        assert out["user"][0] == "error" and "paranoid" in out["user"][1]
        return
    assert out["user"][0] == "ok" and out["user"][1] >= (8 << 20) // PAGE * 0.95
    if paranoid >= 2:
        # Our refusal agrees with the kernel's: it denies exclude_kernel=0 with EACCES.
        assert out["raw_kernel_errno"] == errno.EACCES
        assert out["kernel"][0] == "error" and "perf_event_paranoid=" in out["kernel"][1]
        assert out["cs"][0] == "error" and "kernel mode" in out["cs"][1]
        assert "sysctl -w kernel.perf_event_paranoid=1" in out["cs"][2]
        assert out["kernel_denied"][0] == "error" and "kernel-mode counting" in out["kernel_denied"][1]
    else:
        assert out["raw_kernel_errno"] == 0
        assert out["kernel"][0] == "ok" and out["cs"][0] == "ok"


# --- scheduling ------------------------------------------------------------------------------------------

HW = [resolve(n) for n in ("cycles", "instructions", "cache-misses", "branches", "branch-misses")]
SW = [resolve(n) for n in ("task-clock", "page-faults")]


def _no_probe(_: object) -> bool:
    raise AssertionError("software-only schedules need no probe")


def test_software_events_need_one_pass_and_no_probe() -> None:
    assert schedule(SW, 2, fits=_no_probe) == [SW]
    assert schedule([], 4, fits=_no_probe) == [[]]


def test_schedule_packs_hardware_by_budget_and_software_rides_along() -> None:
    passes = schedule([SW[0], *HW, SW[1]], max_per_group=2, fits=lambda g: True)
    assert passes == [[HW[0], HW[1], SW[0], SW[1]], [HW[2], HW[3]], [HW[4]]]


def test_schedule_halves_groups_the_pmu_cannot_run() -> None:
    # A PMU with three free counters: bigger groups are the ones that never get time_running.
    passes = schedule(HW, max_per_group=5, fits=lambda g: len(g) <= 3)
    assert passes == [HW[:2], HW[2:]]
    assert sorted(e.name for p in passes for e in p) == sorted(e.name for e in HW)


@settings(max_examples=60, deadline=None)
@given(
    picks=st.lists(st.integers(0, len(HW) + len(SW) - 1), unique=True),
    budget=st.integers(1, 6),
    free=st.integers(1, 6),
)
def test_schedule_partitions_events_into_fitting_passes(picks: list[int], budget: int, free: int) -> None:
    pool = HW + SW
    specs = [pool[i] for i in picks]

    def fits(group: Sequence[EventSpec]) -> bool:
        return len(group) <= free

    passes = schedule(specs, budget, fits=fits)
    flat = [e for p in passes for e in p]
    assert sorted(flat, key=pool.index) == sorted(specs, key=pool.index)
    for group in passes:
        hardware = [e for e in group if e.uses_pmu_counter]
        assert len(hardware) <= min(budget, free)


def test_schedule_rejects_an_event_that_never_fits() -> None:
    with pytest.raises(CounterError) as info:
        schedule(HW[:1], max_per_group=4, fits=lambda g: False)
    assert "cycles" in info.value.message


def test_group_fits_probes_for_real() -> None:
    assert group_fits(SW)
    if not cycles_opens():
        with pytest.raises(CounterError) as info:
            schedule(["cycles", "instructions", "task-clock"])
        assert "no hardware PMU" in info.value.message
    else:
        for group in schedule(["cycles", "instructions", "branches", "branch-misses", "task-clock"]):
            assert group_fits(group)


# --- config file and derived metrics -------------------------------------------------------------------


def test_parse_perf_config(tmp_path: Path) -> None:
    path = tmp_path / "perf.json"
    path.write_text(json.dumps({"perf::PERF_COUNT_HW_CPU_CYCLES": "cycles", "instructions": "inst"}))
    assert parse_perf_config(path) == {"perf::PERF_COUNT_HW_CPU_CYCLES": "cycles", "instructions": "inst"}


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        '["cycles"]',
        "{}",
        '{"cycles": 3}',
        '{"cycles": ""}',
        '{"cycles": "c", "instructions": "c"}',
        '{"cycles": "a", "cycles": "b"}',
    ],
)
def test_parse_perf_config_rejects_bad_files(tmp_path: Path, text: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        parse_perf_config(path)
    assert str(path) in info.value.message


def test_parse_perf_config_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        parse_perf_config(tmp_path / "nope.json")
    assert "nope.json" in info.value.message


def test_derived_metrics_from_any_spelling() -> None:
    counts = {
        "cyc": 2000.0,
        "inst": 3000.0,
        "refs": 100.0,
        "miss": 25.0,
        "br": 500.0,
        "brm": 5.0,
        "l1": 800.0,
        "l1m": 80.0,
    }
    events: dict[str, str | EventSpec] = {
        "cyc": "cycles",
        "inst": "instructions",
        "refs": "cache-references",
        "miss": "cache-misses",
        "br": "branch-instructions",
        "brm": resolve("branch-misses"),
        "l1": "L1-dcache-loads",
        "l1m": "L1-dcache-load-misses",
    }
    m = derived_metrics(counts, events)
    assert m["ipc"] == pytest.approx(1.5)
    assert m["cpi"] == pytest.approx(2000 / 3000)
    assert m["cache_miss_rate"] == pytest.approx(0.25)
    assert m["cache_mpki"] == pytest.approx(25 / 3000 * 1000)
    assert m["branch_miss_rate"] == pytest.approx(0.01)
    assert m["L1d_load_miss_rate"] == pytest.approx(0.1)
    assert m["L1d_load_mpki"] == pytest.approx(80 / 3)
    assert "LLC_load_miss_rate" not in m
    assert derived_metrics({"cyc": 0.0, "inst": 5.0}, {"cyc": "cycles", "inst": "instructions"}) == {
        "cpi": 0.0
    }


def test_derived_metrics_with_libpfm_names() -> None:
    if not pfm.available():
        pytest.skip("libpfm4 is not installed")
    m = derived_metrics(
        {"c": 10.0, "i": 20.0},
        {"c": "perf::PERF_COUNT_HW_CPU_CYCLES", "i": "perf::PERF_COUNT_HW_INSTRUCTIONS"},
    )
    assert m["ipc"] == pytest.approx(2.0)
