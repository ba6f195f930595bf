"""Allocator events attributed to modules (layerperf.analysis.memory.allocations), on hand-made spans and events;
the report keeps them through trace.json, and old reports without them still load."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest

from layerperf.analysis.memory.allocations import AllocEvent, ModuleSpan, attribute
from layerperf.analysis.memory.report import with_allocations
from layerperf.data.memory_report import OUTSIDE, OUTSIDE_NAME, Allocations, MemoryReport, NodeMemory
from layerperf.errors import InputError
from layerperf.renderers.svg import memory_timeline_svg
from layerperf.renderers.views.memory import memory_view, module_rows

NAMES = ["block", "block.conv", "block.act", "head"]
# block (0..100) holds conv (10..40) and act (50..60); head runs after (70..90) on its own
SPANS = [ModuleSpan(0, 0, 60), ModuleSpan(1, 10, 40), ModuleSpan(2, 50, 60), ModuleSpan(3, 70, 90)]


def _ev(t: int, nbytes: int, addr: int) -> AllocEvent:
    return AllocEvent(t, nbytes, addr)


EVENTS = [
    _ev(5, 100, 1),     # block's own code
    _ev(10, 1000, 2),   # conv, at its very start: inside it
    _ev(20, 4000, 3),   # conv's temporary...
    _ev(30, -4000, 3),  # ...freed in conv
    _ev(40, -100, 1),   # conv frees block's block, at its very end: still conv
    _ev(55, 500, 4),    # act
    _ev(65, -1000, 2),  # the model's own code between modules
    _ev(75, 2000, 5),   # head
    _ev(80, -50, 99),   # a block allocated before the pass
]


def _allocs(events: list[AllocEvent] = EVENTS, spans: list[ModuleSpan] = SPANS) -> Allocations:
    return attribute(spans, events, NAMES, start_ns=0, end_ns=100, source="test")


def test_self_and_inclusive_per_module() -> None:
    a = _allocs()
    block, conv, act, head = (a.module(i) for i in range(4))
    assert conv is not None and (conv.self_allocated_bytes, conv.self_freed_bytes) == (5000, 4100)
    assert conv.self_allocations == 2 and conv.calls == 1
    assert block is not None and (block.self_allocated_bytes, block.self_freed_bytes) == (100, 0)
    assert (block.allocated_bytes, block.freed_bytes) == (100 + 5000 + 500, 4100)  # its children's too
    assert act is not None and (act.allocated_bytes, act.freed_bytes) == (500, 0)
    assert head is not None and (head.self_allocated_bytes, head.self_freed_bytes) == (2000, 50)
    assert a.outside.name == OUTSIDE_NAME and (a.outside.self_allocated_bytes, a.outside.self_freed_bytes) == (0, 1000)
    # every event is some module's own, once
    assert sum(m.self_allocated_bytes for m in (*a.modules, a.outside)) == a.allocated_bytes == 7600
    assert sum(m.self_freed_bytes for m in (*a.modules, a.outside)) == a.freed_bytes == 5150


def test_peak_is_the_running_sum_maximum_and_its_module() -> None:
    a = _allocs()
    deltas = [e.nbytes for e in EVENTS]
    assert a.live_bytes == tuple(int(x) for x in np.cumsum(deltas))
    assert a.peak_live_bytes == max(np.cumsum(deltas)) == 5100
    assert a.peak_module == "block.conv" and a.peak_layer == 1 and a.peak_t_ns == 20
    assert a.layer == (0, 1, 1, 1, 1, 2, OUTSIDE, 3, 3)


def test_peak_live_and_rise_while_a_module_runs() -> None:
    a = _allocs()
    block, conv, act, head = (a.module(i) for i in range(4))
    assert conv is not None and conv.peak_live_bytes == 5100 and conv.peak_rise_bytes == 5000  # from 100 at its start
    assert act is not None and act.peak_live_bytes == 1500 and act.peak_rise_bytes == 500
    assert block is not None and block.peak_live_bytes == 5100 and block.peak_rise_bytes == 5100
    assert head is not None and head.peak_live_bytes == 2500 and head.peak_rise_bytes == 2000


def test_frees_pair_with_their_allocations_by_address() -> None:
    a = _allocs()
    assert a.unmatched_free_bytes == 50  # address 99 was allocated before the pass
    assert a.retained_bytes == 500 + 2000  # act's and head's blocks, never freed


def test_events_outside_the_pass_are_left_out_and_calls_counted() -> None:
    a = attribute(SPANS + [ModuleSpan(3, 92, 95)], [_ev(-5, 777, 7), *EVENTS, _ev(101, 10**9, 8)], NAMES,
                  start_ns=0, end_ns=100)
    assert a.events == len(EVENTS) and a.peak_live_bytes == 5100
    head = a.module(3)
    assert head is not None and head.calls == 2


def test_event_order_and_span_order_do_not_matter() -> None:
    shuffled = [EVENTS[k] for k in (3, 0, 8, 1, 5, 2, 7, 4, 6)]
    for spans in itertools.permutations(SPANS):
        assert _allocs(sorted(shuffled, key=lambda e: e.t_ns), list(spans)) == _allocs()


def test_nothing_allocated() -> None:
    a = _allocs([])
    assert a.peak_live_bytes == 0 and a.peak_t_ns is None and a.peak_module == ""
    conv = a.module(1)
    assert conv is not None and conv.calls == 1 and conv.allocated_bytes == 0


def _report(allocs: Allocations | None = None) -> MemoryReport:
    nodes = tuple(NodeMemory(n, "Conv2d" if "conv" in n else "Module", 0, 0, 0) for n in NAMES)
    rep = MemoryReport(peak_bytes=1000, peak_index=1, peak_node="block.conv", max_allocated_bytes=None,
                       max_allocated_source=None, simulated_arena_bytes=1000, initializer_bytes=0, inplace=True,
                       nodes=nodes, blocks=())
    return with_allocations(rep, allocs) if allocs else rep


def test_report_takes_the_allocator_peak_as_max_allocated_and_round_trips() -> None:
    rep = _report(_allocs())
    assert rep.max_allocated_bytes == 5100 and rep.max_allocated_source == "allocator peak"
    assert rep.hint is None  # x5.1, but less than 1 MiB apart: not worth a line
    big = _report(_allocs([_ev(20, 8 << 20, 1)]))
    assert big.hint is not None and "temporaries inside modules" in big.hint and "8.00 MiB" in big.hint
    back = MemoryReport.from_json(rep.to_json())
    assert back == rep


def test_report_without_allocations_loads_as_before() -> None:
    d = _report().to_json()
    assert d["allocations"] is None
    del d["allocations"]  # as a file from before the allocator events
    assert MemoryReport.from_json(d).allocations is None


def test_damaged_allocations_are_one_input_error() -> None:
    d = _report(_allocs()).to_json()
    d["allocations"]["timeline"]["t_ns"].pop()
    with pytest.raises(InputError, match="memory section is damaged"):
        MemoryReport.from_json(d)


def test_view_lists_modules_by_own_bytes_then_outside_code() -> None:
    rep = _report(_allocs())
    rows = module_rows(rep, 2)
    assert [r["name"] for r in rows] == ["block.conv", "head", OUTSIDE_NAME]
    assert rows[0]["op_type"] == "Conv2d"
    view = memory_view(rep, fmt="json")
    doc = view.doc["allocations"]
    assert doc["peak_module"] == "block.conv" and doc["peak_live_bytes"] == 5100 and len(doc["modules"]) == 5
    people = memory_view(rep, fmt="table")
    lines = [n.text for n in people.sections[1].notes]
    assert any("peak 4.98 KiB" in line and "block.conv" in line and "event 3 of 9" in line for line in lines)


def test_timeline_svg_draws_the_allocator_peak_and_its_module() -> None:
    svg = memory_timeline_svg(_report(_allocs()), "toy").decode()
    assert "allocator events" in svg and "peak 4.98 KiB in block.conv (Conv2d)" in svg
    assert "events 2-5: in block.conv (Conv2d)" in svg and f"in {OUTSIDE_NAME}" in svg
    plain = memory_timeline_svg(_report(), "toy").decode()
    assert "allocator events" not in plain  # no events: the live-tensor timeline as before
    empty = memory_timeline_svg(_report(replace(_allocs([]), events=0)), "toy").decode()
    assert "allocator events" not in empty


def test_a_long_legend_grows_the_picture_instead_of_being_cut() -> None:
    import re

    from layerperf.renderers.svg import HEIGHT, Canvas

    c = Canvas(10, 100.0, "t", "s")
    c.legend([("box", "#000000", f"made by a module type with a long name {k}") for k in range(20)])
    svg = c.render().decode()
    height = int(re.search(r"<svg [^>]*height='(\d+)'", svg).group(1))  # type: ignore[union-attr]
    lowest = max(float(y) for y in re.findall(r"<text x='[\d.]+' y='([\d.]+)'", svg))
    assert height > HEIGHT and lowest < height
    assert f"<rect width='1200' height='{height}' fill='white'/>" in svg
