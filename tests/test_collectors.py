"""Collectors at layer boundaries: timing, perf counters, resident memory, several as one, and the driver.

The clock, the counter group and /proc/self/statm are injected where a test needs fixed numbers;
the driver and the stepwise executor are also run for real, with the software event task-clock.
"""

from __future__ import annotations

import itertools
import math
import mmap
import time
from collections.abc import Iterator, Sequence

import numpy as np
import pytest

from layerperf.collectors import Boundaries, Collectors
from layerperf.collectors.boundary import empty_pass, nested, pairs
from layerperf.collectors.perf import CounterRequest, PerfCounters
from layerperf.collectors.perf_counts import CounterResult
from layerperf.collectors.rss import ResidentMemory
from layerperf.collectors.timer import Timing
from layerperf.data.metadata import Metadata
from layerperf.data.profile import GraphSummary, Layer, Profile
from layerperf.data.tensor import TensorInfo
from layerperf.errors import BackendError, InputError


def ticking(step: int = 10) -> Iterator[int]:
    return itertools.count(0, step)


def clock_of(values: Iterator[int]) -> object:
    return lambda: next(values)


def test_timing_gives_runs_and_spans() -> None:
    t = Timing(clock=clock_of(ticking()))  # type: ignore[arg-type]
    for _ in range(2):
        t.begin_pass()  # 0
        t.start(0)  # 10
        t.stop(0)  # 20
        t.start(1)  # 30
        t.stop(1)  # 40
        t.end_pass()  # 50
    runs = t.runs()
    assert [(r.start_ns, r.dur_ns) for r in runs] == [(0, 50), (60, 50)]
    assert [(s.layer, s.start_ns, s.dur_ns) for s in runs[1].spans] == [(0, 70, 10), (1, 90, 10)]
    assert t.calls_ns(3) == [[10, 10], [10, 10], []]  # a layer that never ran has no call


def test_timing_nested_and_repeated_calls() -> None:
    t = Timing(clock=clock_of(ticking()))  # type: ignore[arg-type]
    t.begin_pass()
    t.start(0)  # parent at 10
    t.start(1)  # 20
    t.stop(1)  # 30
    t.start(1)  # again, 40
    t.stop(1)  # 50
    t.stop(0)  # 60
    t.end_pass()
    spans = t.runs()[0].spans
    assert [(s.layer, s.start_ns, s.dur_ns) for s in spans] == [(0, 10, 50), (1, 20, 10), (1, 40, 10)]
    assert t.calls_ns(2) == [[50], [10, 10]]
    assert t.self_calls_ns(2) == [[30], [10, 10]]  # the parent's 50 less its child's two calls


def test_nested_calls_know_their_enclosing_call() -> None:
    marks = [(0, "a"), (1, "b"), (2, "c"), (~2, "d"), (~1, "e"), (1, "f"), (~1, "g"), (~0, "h"), (3, "i"), (~3, "j")]
    assert nested(marks) == [(0, "a", "h", -1), (1, "b", "e", 0), (2, "c", "d", 1), (1, "f", "g", 0),
                             (3, "i", "j", -1)]
    with pytest.raises(BackendError, match="layer 1 stopped without a matching start"):
        nested([(0, 1), (~1, 2)])


@pytest.mark.parametrize("marks, message", [
    ([(0, 1), (~1, 2)], "layer 1 stopped without a matching start"),
    ([(0, 1), (1, 2), (~0, 3)], "layer 0 stopped without a matching start"),
    ([(0, 1)], "started and never stopped"),
])
def test_mismatched_boundaries_are_told(marks: list[tuple[int, int]], message: str) -> None:
    with pytest.raises(BackendError, match=message):
        pairs(marks)


def test_a_boundary_outside_a_pass_is_told() -> None:
    t = Timing()
    with pytest.raises(BackendError, match="outside a pass"):
        t.start(0)
    t.begin_pass()
    t.end_pass()
    with pytest.raises(BackendError, match="outside a pass"):
        t.stop(0)


class FakeGroup:
    """A counter group whose raw reads are given: (enabled, running, count per event)."""

    names: tuple[str, ...] = ("a", "b")

    def __init__(self, reads: Sequence[tuple[int, ...]]) -> None:
        self._reads = iter(reads)

    def read_raw(self) -> tuple[int, ...]:
        return next(self._reads)


def test_counter_deltas_scaled_and_calibrated() -> None:
    reads = [(0, 0, 0, 0), (100, 100, 50, 7),  # layer 0, counted all the time
             (100, 100, 50, 7), (300, 200, 150, 9),  # layer 1, counted half its time: x2
             (300, 200, 150, 9), (300, 200, 151, 9)]  # layer 2: less than an empty boundary -> 0
    pc = PerfCounters(FakeGroup(reads), overhead={"a": 5.0, "b": 1.0})
    pc.begin_pass()
    for i in range(3):
        pc.start(i)
        pc.stop(i)
    pc.end_pass()
    counts, fraction = pc.counts(4)
    assert [row[0] for row in counts["a"][:3]] == [45.0, 195.0, 0.0]
    assert [row[0] for row in counts["b"][:3]] == [6.0, 3.0, 0.0]
    assert [row[0] for row in fraction[:3]] == [1.0, 0.5, 1.0]
    assert math.isnan(counts["a"][3][0]) and math.isnan(fraction[3][0])  # never ran: unknown, not 0


def test_counter_calls_of_a_layer_add_up_and_a_group_never_counted_is_nan() -> None:
    reads = [(0, 0, 0, 0), (10, 10, 4, 1), (10, 10, 4, 1), (20, 20, 10, 1),  # layer 0 twice: 4 + 6
             (20, 20, 10, 1), (30, 20, 99, 99)]  # layer 1: enabled, never running -> no estimate
    pc = PerfCounters(FakeGroup(reads))
    pc.begin_pass()
    for layer in (0, 0, 1):
        pc.start(layer)
        pc.stop(layer)
    pc.end_pass()
    counts, fraction = pc.counts(2)
    assert counts["a"][0] == [10.0] and counts["b"][0] == [1.0]
    assert math.isnan(counts["a"][1][0]) and fraction[1] == [0.0]


def test_nested_counts_are_self_counts_with_the_inclusive_beside() -> None:
    # layer 0 encloses 1, which encloses 2; then 1 again directly under 0. Reads: (enabled, running, a, b)
    reads = [(0, 0, 0, 0),  # 0 starts
             (10, 10, 10, 1),  # 1 starts
             (20, 20, 30, 1),  # 2 starts
             (30, 30, 70, 2),  # 2 stops: 40 a, 1 b
             (40, 40, 100, 2),  # 1 stops: 90 a (self 50), 1 b (self 0)
             (50, 50, 120, 3),  # 1 starts again
             (60, 60, 130, 3),  # 1 stops: 10 a
             (70, 70, 200, 9)]  # 0 stops: 200 a (self 200 - 90 - 10 = 100), 9 b (self 9 - 1 - 0 = 8)
    pc = PerfCounters(FakeGroup(reads), overhead={"a": 2.0})
    pc.begin_pass()
    for mark in (0, 1, 2, ~2, ~1, 1, ~1, ~0):
        (pc.start if mark >= 0 else pc.stop)(mark if mark >= 0 else ~mark)
    pc.end_pass()
    tally = pc.tally(3)
    # each call less an empty boundary's 2, its children's whole deltas taken off its own
    assert [row[0] for row in tally.counts["a"]] == [98.0, 48.0 + 8.0, 38.0]
    assert [row[0] for row in tally.inclusive["a"]] == [198.0, 88.0 + 8.0, 38.0]
    assert [row[0] for row in tally.counts["b"]] == [8.0, 0.0, 1.0]
    assert [row[0] for row in tally.inclusive["b"]] == [9.0, 1.0, 1.0]
    assert pc.counts(3) == (tally.counts, tally.fraction)
    # put on the layers: self counts in Layer.counters, the inclusive medians in CounterInfo.inclusive
    layers = [Layer(f"l{i}", "M", parent=None if i == 0 else f"l{i - 1}") for i in range(3)]
    request = CounterRequest(("a", "b"), ("a", "b"), passes=1)
    result = CounterResult(counts=tally.counts, fraction={"a": tally.fraction, "b": tally.fraction},
                           calibration={}, call_overhead_ns=0.0, node_ns=[[1], [1], [1]], schedule=[["a", "b"]],
                           inclusive=tally.inclusive)
    assert CounterResult.from_json(result.to_json()) == result
    info = result.apply(layers, request)
    assert layers[0].counters["a"] == [98.0] and info.inclusive == {"a": [198.0, 96.0, 38.0], "b": [9.0, 1.0, 1.0]}


def test_one_unknown_call_makes_the_pass_unknown() -> None:
    # layer 0 twice: first never running (no estimate), then counted; so is its parent's self count
    reads = [(0, 0, 0, 0), (5, 5, 1, 1), (15, 5, 99, 1), (15, 5, 99, 1), (25, 15, 120, 2), (30, 30, 130, 3)]
    pc = PerfCounters(FakeGroup(reads))
    pc.begin_pass()
    for mark in (1, 0, ~0, 0, ~0, ~1):
        (pc.start if mark >= 0 else pc.stop)(mark if mark >= 0 else ~mark)
    pc.end_pass()
    tally = pc.tally(2)
    assert math.isnan(tally.counts["a"][0][0]) and math.isnan(tally.inclusive["a"][0][0])
    assert math.isnan(tally.counts["a"][1][0]) and tally.inclusive["a"][1] == [130.0]


def test_flat_counts_have_no_inclusive_view() -> None:
    pc = PerfCounters(FakeGroup([(0, 0, 0, 0), (10, 10, 5, 5), (10, 10, 5, 5), (20, 20, 7, 5)]))
    pc.begin_pass()
    for layer in (0, 1):
        pc.start(layer)
        pc.stop(layer)
    pc.end_pass()
    tally = pc.tally(2)
    assert tally.counts == tally.inclusive
    request = CounterRequest(("a", "b"), ("a", "b"), passes=1)
    result = CounterResult(counts=tally.counts, fraction={}, calibration={}, call_overhead_ns=0.0,
                           node_ns=[[1], [1]], schedule=[["a", "b"]], inclusive=tally.inclusive)
    assert result.apply([Layer("x", "Relu"), Layer("y", "Relu")], request).inclusive is None


def test_a_count_less_an_unknown_overhead_is_unknown() -> None:
    pc = PerfCounters(FakeGroup([(0, 0, 0, 0), (10, 10, 50, 5)]), overhead={"a": math.nan})
    pc.begin_pass()
    pc.start(0)
    pc.stop(0)
    pc.end_pass()
    counts, _ = pc.counts(1)
    assert math.isnan(counts["a"][0][0]) and counts["b"][0] == [5.0]


def statm(pages: Iterator[int]) -> object:
    return lambda: f"999 {next(pages)} 0 0 0 0 0\n".encode()


def test_resident_memory_samples_every_rate_and_keeps_the_high_water_mark() -> None:
    import os

    page = os.sysconf("SC_PAGE_SIZE")
    pages = iter([10, 11, 30, 12, 13, 14, 15])  # baseline, then 3 layers x 2 passes
    rss = ResidentMemory(2, read=statm(pages), clock=clock_of(ticking()))  # type: ignore[arg-type]
    for _ in range(2):
        rss.begin_pass()
        for i in range(3):
            rss.start(i)
            rss.stop(i)
        rss.end_pass()
    rt = rss.runtime()
    assert rt.sample_rate == 2 and rt.rss_baseline_bytes == 10 * page
    assert rt.rss_hwm_bytes == 30 * page  # layer 1 of pass 0 was thinned out, its reading still counts
    got = [(s.run, s.node, s.rss_bytes // page, s.hwm_bytes // page) for s in rt.rss_samples]
    assert got == [(0, 0, 11, 11), (0, 2, 12, 30), (1, 0, 13, 30), (1, 2, 15, 30)]
    assert all(s.t_ns > 0 for s in rt.rss_samples)


def test_resident_memory_for_real() -> None:
    with ResidentMemory(1) as rss:
        rss.begin_pass()
        rss.start(0)
        # a fresh anonymous mapping, so its pages are new to the process whatever the allocator kept
        # resident from earlier tests; writing every byte makes them resident
        block = mmap.mmap(-1, 64 << 20)
        np.frombuffer(block, dtype=np.uint8)[:] = 1
        rss.stop(0)
        rss.end_pass()
    block.close()
    rt = rss.runtime()
    assert rt.rss_samples[0].rss_bytes - (rt.rss_baseline_bytes or 0) >= 48 << 20


def test_resident_memory_refuses_rate_zero() -> None:
    with pytest.raises(InputError):
        ResidentMemory(0, read=lambda: b"")


def test_boundaries_enclose_in_order() -> None:
    calls: list[str] = []

    class Recorder:
        def __init__(self, name: str) -> None:
            self.name = name

        def begin_pass(self) -> None:
            calls.append(f"begin {self.name}")

        def start(self, layer: int) -> None:
            calls.append(f"start {self.name} {layer}")

        def stop(self, layer: int) -> None:
            calls.append(f"stop {self.name} {layer}")

        def end_pass(self) -> None:
            calls.append(f"end {self.name}")

    empty_pass(Boundaries([Recorder("outer"), Recorder("inner")]))
    assert calls == ["begin outer", "begin inner", "start outer 0", "start inner 0", "stop inner 0",
                     "stop outer 0", "end inner", "end outer"]
    one = Recorder("only")
    b = Boundaries([one])
    assert b.start == one.start and b.stop == one.stop  # nothing in between for one collector


def spin(seconds: float) -> None:
    # on the thread's CPU clock, so that a busy host preempting the test does not shorten the work
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


WORK_S = (0.004, 0.0005, 0.002)  # the CPU time each of three toy layers spins


def toy_pass(collector: object) -> None:
    c = collector
    c.begin_pass()  # type: ignore[attr-defined]
    for i, seconds in enumerate(WORK_S):
        c.start(i)  # type: ignore[attr-defined]
        spin(seconds)
        c.stop(i)  # type: ignore[attr-defined]
    c.end_pass()  # type: ignore[attr-defined]


def toy_profile() -> Profile:
    layers = [Layer(f"l{i}", "Relu", inputs=(TensorInfo(f"t{i}", (1024,), "float32"),),
                    outputs=(TensorInfo(f"t{i + 1}", (1024,), "float32"),)) for i in range(3)]
    return Profile(metadata=Metadata(), layers=layers, runs=[], graph=GraphSummary(("t0",), ("t3",), {}))


def test_driver_counts_memory_and_fills_the_profile() -> None:
    progress: list[tuple[str, int, int]] = []
    request = Collectors.make(events=["task-clock", "page-faults"], passes=3, memory=True,
                              progress=lambda *a: progress.append(a))
    driver = request.driver(3, threads="self").run(toy_pass)
    assert driver.counted is not None
    assert CounterResult.from_json(driver.counted.to_json()) == driver.counted
    prof = toy_profile()
    driver.fill(prof)
    clocks = [float(np.median(layer.counters["task-clock"])) for layer in prof.layers]
    assert all(len(layer.counters["task-clock"]) == 3 for layer in prof.layers)
    # task-clock is CPU ns: each layer's spin, within the host's noise
    assert clocks[0] > clocks[2] > clocks[1] > 0
    assert clocks[0] == pytest.approx(WORK_S[0] * 1e9, rel=0.5)
    info = prof.counters
    assert info is not None and info.schedule == [["task-clock", "page-faults"]] and info.passes == 3
    assert info.calibration["task-clock"] > 0 and info.call_overhead_ns is not None
    # wall time, which a busy host can only stretch beyond the CPU time spun
    assert info.stepwise_median_ns[0] > 0.8 * WORK_S[0] * 1e9
    assert prof.memory is not None and prof.memory.runtime is not None
    assert len(prof.memory.runtime.rss_samples) == 2 * 3  # two memory passes, every layer
    # two memory passes, then 3 counted and 3 timed: progress counts every pass
    assert progress[-1][1:] == (8, 8)


def test_driver_with_nothing_requested_runs_nothing() -> None:
    ran: list[object] = []
    driver = Collectors().driver(3).run(ran.append)
    prof = toy_profile()
    driver.fill(prof)
    assert not ran and prof.counters is None and prof.memory is None


def test_memory_with_sampling_off_is_still_analyzed() -> None:
    ran: list[object] = []
    driver = Collectors.make(memory=True, sample_rate=0).driver(3).run(ran.append)
    prof = toy_profile()
    driver.fill(prof)
    assert not ran and prof.memory is not None and prof.memory.peak_bytes == 2 * 4096
    assert prof.memory.runtime is not None and not prof.memory.runtime.rss_samples


def test_stepwise_executor_drives_a_collector() -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from layerperf.backends.ort.stepwise import StepwiseExecutor

    w = numpy_helper.from_array(np.ones((64, 64), np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["a"], name="mm1"),
             helper.make_node("Relu", ["a"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "w"], ["y"], name="mm2")]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 64])], [w])
    model: onnx.ModelProto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    executor = StepwiseExecutor(model, ["mm1", "relu", "mm2"], threads=1)
    feed = {"x": np.ones((64, 64), np.float32)}
    timing = Timing()
    _, times = executor.run_pass(feed, collector=timing)
    calls = timing.calls_ns(3)
    assert [len(c) for c in calls] == [1, 1, 1]
    assert all(c[0] >= t for c, t in zip(calls, times, strict=True))  # the collector's window holds the call
    with pytest.raises(ValueError, match="hooks or a collector"):
        executor.run_pass(feed, lambda i: None, collector=timing)


def test_progress_says_what_the_passes_collect() -> None:
    """--events alone collects counters, not memory: the progress bar says only what is collected."""
    from layerperf.collectors.driver import progress_label
    from layerperf.collectors.rss import MemoryRequest

    counting = CounterRequest(("task-clock",), ("task-clock",))
    assert progress_label(Collectors(counters=counting)) == "collecting (counters)"
    assert progress_label(Collectors(memory=MemoryRequest(1))) == "collecting (memory)"
    assert progress_label(Collectors(counters=counting, memory=MemoryRequest(1))) == "collecting (counters, memory)"
    assert progress_label(Collectors(counters=counting, memory=MemoryRequest(0))) == "collecting (counters)"
    seen: list[str] = []
    Collectors(memory=MemoryRequest(1), progress=lambda what, done, total: seen.append(what)).driver(1).run(
        empty_pass)
    assert seen and set(seen) == {"collecting (memory)"}
