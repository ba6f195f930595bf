"""libpfm4 through ctypes: perf:: strings resolve exactly like perf's names."""

from __future__ import annotations

import pytest

from layerperf.counters import pfm, pfm_event_list, resolve
from layerperf.errors import CounterError

pytestmark = pytest.mark.skipif(not pfm.available(), reason="libpfm4 is not installed")


@pytest.mark.parametrize(
    ("pfm_name", "perf_name"),
    [
        ("perf::PERF_COUNT_HW_CPU_CYCLES", "cycles"),
        ("perf::PERF_COUNT_HW_INSTRUCTIONS", "instructions"),
        ("perf::PERF_COUNT_HW_CACHE_MISSES", "cache-misses"),
        ("perf::PERF_COUNT_HW_BRANCH_MISSES", "branch-misses"),
        ("perf::PERF_COUNT_HW_REF_CPU_CYCLES", "ref-cycles"),
        ("perf::PERF_COUNT_HW_CACHE_DTLB:READ:ACCESS", "dTLB-loads"),
        ("perf::PERF_COUNT_HW_CACHE_DTLB:READ:MISS", "dTLB-load-misses"),
        ("perf::PERF_COUNT_HW_CACHE_L1D:WRITE:MISS", "L1-dcache-store-misses"),
        ("perf::PERF_COUNT_HW_CACHE_LL:READ:MISS", "LLC-load-misses"),
        ("perf::PERF_COUNT_SW_PAGE_FAULTS", "page-faults"),
        ("perf::PERF_COUNT_SW_TASK_CLOCK", "task-clock"),
        ("perf::PERF_COUNT_SW_CPU_CLOCK", "cpu-clock"),
        ("perf::PERF_COUNT_SW_CONTEXT_SWITCHES", "context-switches"),
    ],
)
def test_perf_pmu_strings_match_perf_names(pfm_name: str, perf_name: str) -> None:
    via_pfm, via_perf = resolve(pfm_name), resolve(perf_name)
    assert via_pfm.key == via_perf.key
    assert via_pfm.kernel_only == via_perf.kernel_only
    assert via_pfm.modifiers == ""
    assert via_pfm.name == pfm_name


def test_explicit_privilege_modifiers_survive() -> None:
    assert resolve("perf::PERF_COUNT_HW_CPU_CYCLES:u").modifiers == "u"
    assert resolve("perf::PERF_COUNT_HW_CPU_CYCLES:k").modifiers == "k"
    assert resolve("perf::PERF_COUNT_SW_PAGE_FAULTS:u=0:k=1").modifiers == "k"


def test_fully_qualified_name() -> None:
    _, fstr = pfm.encode("perf::PERF_COUNT_SW_PAGE_FAULTS")
    assert fstr.startswith("perf::PERF_COUNT_SW_PAGE_FAULTS")


def test_libpfm_messages_come_through() -> None:
    with pytest.raises(CounterError) as missing:
        resolve("perf::PERF_COUNT_HW_CPU_CYCLE")
    assert "event not found" in missing.value.message
    assert "perf::PERF_COUNT_HW_CPU_CYCLES" in (missing.value.hint or "")
    with pytest.raises(CounterError) as bad_value:
        resolve("perf::PERF_COUNT_HW_CPU_CYCLES:u=2")
    assert "invalid event attribute value" in bad_value.value.message


def test_event_list_covers_the_generic_pmu() -> None:
    events = pfm_event_list()
    names = {e.name for e in events}
    assert "perf::PERF_COUNT_HW_CPU_CYCLES" in names
    assert "perf::PERF_COUNT_SW_PAGE_FAULTS" in names
    assert all("::" in n for n in names)
    assert {p.name for p in pfm.pmus()} >= {"perf"}
