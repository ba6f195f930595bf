"""bench: the statistics, and the timing loop driven by a fake clock (no real timings asserted)."""

from __future__ import annotations

import math
import mmap
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from layerperf.bench.counting import count_per_call
from layerperf.bench.measure import MeasureOptions, loops_for, measure, settled
from layerperf.bench.stats import describe, outlier_masks
from layerperf.errors import InputError


# -- statistics ------------------------------------------------------------------------------------
def test_describe_known_values() -> None:
    ns = [1000.0, 2000.0, 3000.0, 4000.0, 100000.0]
    st = describe(ns)
    assert (st.n, st.min_us, st.median_us, st.max_us) == (5, 1.0, 3.0, 100.0)
    assert st.mean_us == pytest.approx(22.0)
    assert st.stddev_us == pytest.approx(float(np.std([1, 2, 3, 4, 100], ddof=1)))
    assert st.cv == pytest.approx(st.stddev_us / 22.0)
    assert (st.q1_us, st.q3_us) == (2.0, 4.0)
    assert st.p90_us == pytest.approx(float(np.percentile([1, 2, 3, 4, 100], 90)))
    # fences: [2 - 1.5*2, 4 + 1.5*2] = [-1, 7]: only 100 is out
    assert (st.outliers_low, st.outliers_high, st.outliers) == (0, 1, 1)
    assert st.noisy


def test_outlier_fences_both_sides() -> None:
    values = [10.0] * 8 + [11.0] * 8 + [0.0, 30.0]
    low, high = outlier_masks(values)
    assert low.tolist().count(True) == 1 and low[-2]
    assert high.tolist().count(True) == 1 and high[-1]


def test_steady_samples_are_not_noisy() -> None:
    st = describe([1000.0, 1005.0, 995.0, 1000.0, 1002.0, 998.0])
    assert st.cv < 0.05 and not st.noisy and st.outliers == 0


def test_single_sample_has_no_spread() -> None:
    st = describe([5000.0])
    assert math.isnan(st.stddev_us) and st.noisy


# -- the loop ------------------------------------------------------------------------------------------
class FakeOp:
    """A call whose duration follows a script, on a clock that only the calls advance."""

    def __init__(self, durations_ns: list[float] | None = None, steady_ns: float = 1000.0) -> None:
        self.now = 0
        self.calls = 0
        self.script = list(durations_ns or [])
        self.steady = steady_ns

    def clock(self) -> int:
        return self.now

    def __call__(self) -> None:
        self.now += int(self.script.pop(0) if self.script else self.steady)
        self.calls += 1


def test_loops_for_min_time() -> None:
    assert loops_for(1e6, 1.0) == 1  # a 1 ms call fills a 1 ms sample
    assert loops_for(10_000, 1.0) == 100
    assert loops_for(3_000, 1.0) == 334
    assert loops_for(0.0, 1.0) == 1_000_000  # guarded against a zero reading


def test_settled_compares_window_medians() -> None:
    assert not settled([1.0] * 9, 5, 0.05)  # fewer than two windows
    assert settled([2.0] * 5 + [1.0] * 5, 5, 0.05) is False
    assert settled([1.02] * 5 + [1.0] * 5, 5, 0.05)


def test_warm_up_until_settled_then_samples_last_min_time() -> None:
    # 40 slow cold calls, then steady 10 µs calls
    op = FakeOp([50_000.0] * 40, steady_ns=10_000.0)
    t = measure(op, MeasureOptions(samples=7, min_time_ms=1.0), clock=op.clock, waited=lambda: 0)
    assert t.warmup_settled
    assert t.loops == 100  # sized from the settled 10 µs, not the cold 50 µs
    assert len(t.per_call_ns) == 7 and set(t.per_call_ns) == {10_000.0}
    assert t.per_call_ns and all(v * t.loops >= 1e6 for v in t.per_call_ns)
    assert not t.disturbed_ns and not t.used_disturbed


def test_warm_up_is_bounded_when_timings_never_settle() -> None:
    # one call per batch, alternating 1 µs and 3 µs: the windows' medians never agree
    op = FakeOp([1000.0 if i % 2 else 3000.0 for i in range(100_000)])
    opts = MeasureOptions(samples=3, min_time_ms=0.0001, warmup_max_s=0.002)
    t = measure(op, opts, clock=op.clock, waited=lambda: 0)
    assert not t.warmup_settled
    assert t.warmup_s == pytest.approx(0.002, rel=0.5)


def test_disturbed_samples_are_set_aside_and_counted() -> None:
    op = FakeOp(steady_ns=1_000_000.0)  # 1 ms calls: one call per sample
    waited = {"ns": 0}
    real_call = op.__call__

    def call() -> None:
        real_call()
        if op.calls % 3 == 0:  # every third call, the threads waited 0.5 ms for a CPU
            waited["ns"] += 500_000

    t = measure(call, MeasureOptions(samples=6, min_time_ms=1.0), clock=op.clock, waited=lambda: waited["ns"])
    assert t.loops == 1 and t.wait_checked and not t.used_disturbed
    assert len(t.per_call_ns) == 6
    assert len(t.disturbed_ns) in (2, 3)  # one in three of the 8 or 9 samples taken


def test_all_samples_used_and_flagged_when_the_machine_stays_busy() -> None:
    op = FakeOp(steady_ns=1_000_000.0)
    counter = iter(range(1_000_000))

    def always_waiting() -> int:
        return next(counter) * 1_000_000  # a full sample's time waited between every two reads

    t = measure(op, MeasureOptions(samples=4, min_time_ms=1.0, max_samples_factor=3), clock=op.clock,
                waited=always_waiting)
    assert t.used_disturbed
    assert len(t.per_call_ns) == 12 and len(t.disturbed_ns) == 12


def test_no_wait_check_keeps_every_sample() -> None:
    op = FakeOp(steady_ns=1_000_000.0)
    t = measure(op, MeasureOptions(samples=5, max_wait_fraction=None), clock=op.clock, waited=lambda: 10**12)
    assert len(t.per_call_ns) == 5 and not t.disturbed_ns and not t.wait_checked


def test_counters_are_per_call() -> None:
    pages = 64
    size = pages * mmap.PAGESIZE

    def touch_fresh_pages() -> None:  # each call faults in `pages` new anonymous pages
        with mmap.mmap(-1, size) as m:
            for offset in range(0, size, mmap.PAGESIZE):
                m[offset] = 1

    counts = count_per_call(touch_fresh_pages, loops=4, samples=3, events=["task-clock", "page-faults"])
    assert set(counts) == {"task-clock", "page-faults"}
    assert counts["page-faults"] >= pages
    assert counts["task-clock"] > 0


@pytest.mark.parametrize("opts", [MeasureOptions(samples=2), MeasureOptions(min_time_ms=0),
                                  MeasureOptions(warmup_max_s=-1)])
def test_bad_options(opts: MeasureOptions) -> None:
    with pytest.raises(InputError):
        opts.validate()


# -- memory ----------------------------------------------------------------------------------------------
PEAK_CHILD = """
import mmap
from layerperf.bench.peak_rss import PeakMemory
mem = PeakMemory()
mem.start()
# 64 MiB of fresh pages, touched, then unmapped before stop(): an anonymous mapping, never memory the
# allocator kept resident from before
block = mmap.mmap(-1, 64 << 20)
for offset in range(0, 64 << 20, mmap.PAGESIZE):
    block[offset] = 1
block.close()
print(mem.source, mem.stop())
"""


def test_peak_memory_sees_a_transient_allocation() -> None:
    """In a process of its own: in a test runner's process the reading depends on what earlier tests left
    there (under pytest-xdist, make test-latest once read 0 for the 64 MiB)."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent / "src")}
    out = subprocess.run([sys.executable, "-c", PEAK_CHILD], capture_output=True, text=True, env=env, timeout=120,
                         check=True).stdout.split()
    source, peak = out[0], int(out[1])
    if source == "VmHWM":
        assert peak >= 60 << 20
    else:
        assert peak >= 0  # ru_maxrss: a lower bound only


def test_yardstick_read_between_all_samples_taken() -> None:
    op = FakeOp(steady_ns=1_000_000.0)
    waited = {"ns": 0}

    def call() -> None:
        op()
        if op.calls % 2 == 0:
            waited["ns"] += 600_000

    t = measure(call, MeasureOptions(samples=4), clock=op.clock, waited=lambda: waited["ns"])
    assert len(t.disturbed_ns) > 0
    assert len(t.yardstick_ns) == len(t.per_call_ns) + len(t.disturbed_ns) + 1  # before each, and after the last


class FakeRuler:
    """A yardstick reading that follows a script (ns), taking that long on the fake clock."""

    def __init__(self, op: FakeOp, script: list[float], then: float) -> None:
        self.op, self.script, self.then = op, list(script), then

    def __call__(self, clock: object) -> float:
        y = self.script.pop(0) if self.script else self.then
        self.op.now += int(y)
        return y


FAST, SLOW = 10_000.0, 25_000.0  # yardstick readings: full speed, and 2.5x slower
FIRST_LOOK = [FAST] * 10  # the readings measure() takes before the first sample when checking speed


def test_a_slow_reading_sets_aside_the_samples_around_it() -> None:
    # readings r0, r1, r2 ... with r2 slow: samples 0-3 had r2 within a slot of them (sample i lies
    # between r_i and r_i+1); sample 4 onwards are clean.
    op = FakeOp(steady_ns=1_000_000.0)
    ruler = FakeRuler(op, FIRST_LOOK + [11_000.0, 11_000.0, SLOW], then=11_000.0)
    t = measure(op, MeasureOptions(samples=6, speed_wait_s=1.0), clock=op.clock, ruler=ruler, waited=lambda: 0)
    assert t.slowed == 4 and not t.slowed_used
    assert len(t.per_call_ns) == 6 and t.requested == 6
    assert len(t.yardstick_ns) == 12  # 11 samples: the 11th proves the 10th clean
    assert t.yardstick_ns[2] == SLOW and t.speed_reference_ns == FAST


def test_a_faster_reading_lowers_the_reference_and_judges_earlier_samples_again() -> None:
    # No remembered speed and a slowed start: the first samples look fine against the first look,
    # until the CPU speeds up and shows what full speed is.
    op = FakeOp(steady_ns=1_000_000.0)
    ruler = FakeRuler(op, [SLOW] * 10 + [SLOW] * 3, then=FAST)  # r0-r2 slow, r3 on fast
    t = measure(op, MeasureOptions(samples=4, speed_wait_s=1.0), clock=op.clock, ruler=ruler, waited=lambda: 0)
    assert t.speed_reference_ns == FAST
    assert t.slowed == 4 and len(t.per_call_ns) == 4 and not t.slowed_used  # samples 0-3 slowed, 4-7 used


@pytest.mark.parametrize(("fast_readings", "used", "flagged"), [(5, 3, False), (4, 12, True)])
def test_too_few_clean_samples(fast_readings: int, used: int, flagged: bool) -> None:
    # Slowed from reading r5 (r4) on: samples 0-2 (0-1) are clean. Three clean samples are used
    # alone; two are too few to stand on, and every sample taken is used, flagged.
    op = FakeOp(steady_ns=1_000_000.0)
    ruler = FakeRuler(op, FIRST_LOOK + [11_000.0] * fast_readings, then=SLOW)
    t = measure(op, MeasureOptions(samples=6, speed_wait_s=0.0001, max_samples_factor=2), clock=op.clock,
                ruler=ruler, waited=lambda: 0)
    assert len(t.per_call_ns) == used and t.requested == 6 and t.slowed_used == flagged
    assert t.slowed == 12 - (fast_readings - 2)  # the budget, 6 samples x 2, less the clean ones


def test_a_run_slowed_throughout_uses_every_sample_and_flags_it() -> None:
    # Slowed against the speed this machine showed before, past the wait: every sample, flagged.
    op = FakeOp(steady_ns=1_000_000.0)
    ruler = FakeRuler(op, [], then=SLOW)
    t = measure(op, MeasureOptions(samples=4, speed_wait_s=0.0001, speed_reference_ns=FAST), clock=op.clock,
                ruler=ruler, waited=lambda: 0)
    assert t.slowed_used and len(t.per_call_ns) == 16 and t.slowed == 16  # the budget: 4 samples x 4
    assert t.speed_reference_ns == FAST


def test_the_speed_wait_extends_the_budget_in_time() -> None:
    op = FakeOp(steady_ns=1_000_000.0)
    ruler = FakeRuler(op, [], then=SLOW)
    t = measure(op, MeasureOptions(samples=4, speed_wait_s=0.05, speed_reference_ns=FAST), clock=op.clock,
                ruler=ruler, waited=lambda: 0)
    # 1 ms samples and 25 µs readings: ~48 fit in the 50 ms wait, well past the 16 of the budget
    assert 40 <= len(t.per_call_ns) <= 50 and t.slowed_used


def test_no_speed_wait_takes_samples_at_any_speed() -> None:
    op = FakeOp(steady_ns=1_000_000.0)
    ruler = FakeRuler(op, [FAST, 30_000.0, FAST, 30_000.0], then=30_000.0)
    t = measure(op, MeasureOptions(samples=4, speed_reference_ns=FAST), clock=op.clock, ruler=ruler, waited=lambda: 0)
    assert t.slowed == 0 and not t.slowed_used and t.speed_reference_ns is None
    assert len(t.per_call_ns) == 4 and t.yardstick_ns == (FAST, 30_000.0, FAST, 30_000.0, 30_000.0)


def test_full_speed_is_remembered_per_machine_and_only_lowered(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from layerperf.bench import speed

    monkeypatch.setenv("LAYERPERF_CACHE", str(tmp_path))
    assert speed.reference_ns() is None
    speed.remember(20_000.0)
    speed.remember(30_000.0)  # a slower run does not raise it
    assert speed.reference_ns() == 20_000.0
    speed.remember(15_000.0)
    assert speed.reference_ns() == 15_000.0
    speed.path().write_text("{not json")
    assert speed.reference_ns() is None
    speed.remember(18_000.0)  # a damaged cache is replaced
    assert speed.reference_ns() == 18_000.0


def test_warnings_name_set_aside_and_fallback_samples() -> None:
    from layerperf.backends.base import Kernel
    from layerperf.bench.api import BenchSettings, _warnings
    from layerperf.bench.build import build_op
    from layerperf.bench.measure import Samples
    from layerperf.cost import Cost

    one = build_op("Relu", {"X": "1x8"})
    kernel = (Kernel("Relu", "Relu", "CPUExecutionProvider"),)
    base = {"disturbed_ns": (), "loops": 1, "warmup_batches": 10, "warmup_settled": True, "warmup_s": 0.1,
            "speed_reference_ns": FAST, "requested": 6, "yardstick_ns": (FAST,) * 8}

    def says(**kw: object) -> str:
        timing = Samples(**{**base, **kw})  # type: ignore[arg-type]
        said = _warnings(one, kernel, timing, Cost(8, 32, 32), None, BenchSettings(speed_wait_s=2.0), "VmHWM")
        return " | ".join(said)

    clean = (1000.0,) * 6
    assert says(per_call_ns=clean, slowed_ns=(2000.0,)) == ""  # set aside and replaced: nothing to warn of
    assert "only 3 of the 6 samples" in says(per_call_ns=clean[:3], slowed_ns=(2000.0,) * 9)
    msg = says(per_call_ns=clean[:2] + (2000.0,) * 4, slowed_ns=(2000.0,) * 4, slowed_used=True)
    assert "4 of the 6 samples used were taken slowed" in msg and "--speed-wait" in msg
