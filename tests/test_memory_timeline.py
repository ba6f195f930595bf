"""The live-tensor timeline, the best-fit allocator and the report, on hand-built Profiles (no runtime)."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layerperf.analysis.memory import live as timeline
from layerperf.analysis.memory import placement as allocator
from layerperf.analysis.memory.report import analyze_memory, memory_report, workspace_bytes
from layerperf.data.memory_report import ArenaRun, MemoryReport, RuntimeMemory
from layerperf.data.metadata import Metadata
from layerperf.data.profile import GraphSummary, Layer, Profile
from layerperf.data.tensor import TensorInfo
from layerperf.errors import InputError


def t(name: str, nbytes: int) -> TensorInfo:
    return TensorInfo(name, (nbytes,), "uint8")


def node(name: str, op: str, ins: list[tuple[str, int]], outs: list[tuple[str, int]], domain: str = "") -> Layer:
    return Layer(name, op, domain, inputs=tuple(t(*i) for i in ins), outputs=tuple(t(*o) for o in outs))


def prof(layers: list[Layer], inputs: list[str], outputs: list[str], inits: dict[str, int] | None = None) -> Profile:
    graph = GraphSummary(tuple(inputs), tuple(outputs), inits or {})
    return Profile(metadata=Metadata(), layers=layers, runs=[], graph=graph)


def branches() -> Profile:
    """x -> A -> a; a -> B -> b; a -> C -> c; B and C join in D -> y (Conv: never in place)."""
    return prof([
        node("A", "Conv", [("x", 10), ("w", 1000)], [("a", 100)]),
        node("B", "Conv", [("a", 100)], [("b", 200)]),
        node("C", "Conv", [("a", 100)], [("c", 300)]),
        node("D", "Add", [("b", 200), ("c", 300)], [("y", 50)]),
    ], ["x"], ["y"], {"w": 1000})


def test_branches_exact_peak_and_tensors() -> None:
    tl = timeline.build(branches())
    # A: x+a; B: a+b; C: a+b+c (a's last use); D: b+c+y
    assert tl.live_bytes == (110, 300, 600, 550)
    assert (tl.peak_bytes, tl.peak_index, tl.nodes[tl.peak_index]) == (600, 2, "C")
    assert [b.name for b in tl.live_blocks(2)] == ["c", "b", "a"]
    assert tl.initializer_bytes == 1000  # weights are counted apart, never in the live bytes


def test_branch_order_moves_the_peak() -> None:
    p = branches()
    p.layers[1], p.layers[2] = p.layers[2], p.layers[1]  # C runs before B
    tl = timeline.build(p)
    assert tl.live_bytes == (110, 400, 600, 550)
    assert tl.nodes[tl.peak_index] == "B"


def test_graph_output_lives_to_the_end_and_dead_output_only_at_its_producer() -> None:
    p = prof([
        node("A", "Conv", [("x", 8)], [("early", 70), ("unused", 5)]),
        node("B", "Conv", [("x", 8)], [("b", 16)]),
        node("C", "Conv", [("b", 16)], [("y", 4)]),
    ], ["x"], ["early", "y"])
    tl = timeline.build(p)
    assert tl.live_bytes == (8 + 70 + 5, 8 + 70 + 16, 70 + 16 + 4)
    kinds = {b.name: b.kind for b in tl.blocks}
    assert kinds == {"x": "input", "early": "output", "unused": "activation", "b": "activation", "y": "output"}


def inplace_chain(op: str = "Relu", out_bytes: int = 100) -> Profile:
    return prof([
        node("A", "Conv", [("x", 40)], [("a", 100)]),
        node("R", op, [("a", 100)], [("r", out_bytes)]),
        node("C", "Conv", [("r", out_bytes)], [("y", 100)]),
    ], ["x"], ["y"])


def test_inplace_op_shares_its_dying_input() -> None:
    shared = timeline.build(inplace_chain())
    assert shared.live_bytes == (140, 100, 200)
    assert any(b.tensors == ("a", "r") for b in shared.blocks)
    strict = timeline.build(inplace_chain(), inplace=False)
    assert strict.live_bytes == (140, 200, 200)


def test_inplace_needs_equal_size_and_a_dying_activation() -> None:
    assert timeline.build(inplace_chain("Cast", 200)).live_bytes == (140, 300, 300)  # a wider type
    assert timeline.build(inplace_chain("Gelu")).live_bytes == (140, 200, 200)  # not an in-place kernel
    on_input = prof([node("R", "Relu", [("x", 64)], [("r", 64)]), node("C", "Conv", [("r", 64)], [("y", 8)])],
                    ["x"], ["y"])
    assert timeline.build(on_input).live_bytes == (128, 72)  # the caller's input is never overwritten
    still_used = prof([
        node("A", "Conv", [("x", 8)], [("a", 64)]),
        node("R", "Relu", [("a", 64)], [("r", 64)]),
        node("D", "Add", [("r", 64), ("a", 64)], [("y", 64)]),
    ], ["x"], ["y"])
    assert timeline.build(still_used).live_bytes == (72, 128, 192)


def test_views_alias_their_input_whatever_its_lifetime() -> None:
    p = prof([
        node("A", "Conv", [("x", 8)], [("a", 64)]),
        node("V", "Reshape", [("a", 64), ("shape", 16)], [("v", 64)]),
        node("W", "Reshape", [("weight", 32), ("shape", 16)], [("wv", 32)]),
        node("D", "Add", [("v", 64), ("a", 64), ("wv", 32)], [("y", 64)]),
    ], ["x"], ["y"], {"shape": 16, "weight": 32})
    tl = timeline.build(p)
    assert tl.live_bytes == (72, 64, 64, 128)  # v is a, wv is a view of a weight
    assert any(b.tensors == ("a", "v") and b.last == 3 for b in tl.blocks)


def test_fused_conv_writes_over_its_sum_input_not_over_x() -> None:
    p = prof([
        node("A", "Conv", [("x", 8)], [("a", 64)]),
        node("B", "Conv", [("a", 64)], [("b", 64)]),
        node("F", "Conv", [("b", 64), ("w", 4), ("a", 64)], [("y", 64)], domain="com.microsoft.nchwc"),
    ], ["x"], ["y"], {"w": 4})
    tl = timeline.build(p)
    assert tl.live_bytes == (72, 128, 128)
    assert any(b.tensors == ("a", "y") for b in tl.blocks)


def test_no_graph_section_is_a_clear_error() -> None:
    p = branches()
    p.graph = None
    with pytest.raises(InputError, match="graph section"):
        timeline.build(p)


# -- allocator -------------------------------------------------------------------------------------

def test_allocator_reuses_gaps_best_fit() -> None:
    blocks = [timeline.Block(("a",), 64, 0, 1, "activation"), timeline.Block(("b",), 64, 1, 2, "activation"),
              timeline.Block(("c",), 64, 2, 3, "activation")]
    placement = allocator.place(blocks)
    assert placement.offsets == (0, 64, 0) and placement.arena_bytes == 128
    # While "new" lives, gaps of 256 (at 0) and 128 (at 384) are free: best fit takes the smaller one.
    blocks = [timeline.Block(("s1",), 256, 0, 0, "activation"), timeline.Block(("l1",), 128, 0, 9, "activation"),
              timeline.Block(("s2",), 128, 0, 0, "activation"), timeline.Block(("l2",), 64, 0, 9, "activation"),
              timeline.Block(("new",), 64, 5, 6, "activation")]
    placement = allocator.place(blocks)
    assert placement.offsets == (0, 256, 384, 512, 384) and placement.arena_bytes == 576


intervals = st.lists(st.tuples(st.integers(1, 5000), st.integers(0, 30), st.integers(0, 10)), min_size=1, max_size=40)


@given(intervals)
@settings(max_examples=200, deadline=None)
def test_allocator_never_overlaps_live_blocks(raw: list[tuple[int, int, int]]) -> None:
    blocks = [timeline.Block((f"t{i}",), n, s, s + d, "activation") for i, (n, s, d) in enumerate(raw)]
    placement = allocator.place(blocks)
    spans = [(o, o + allocator.aligned(b.nbytes)) for b, o in zip(blocks, placement.offsets, strict=True)]
    for i, (bi, (si, ei)) in enumerate(zip(blocks, spans, strict=True)):
        assert si % allocator.ALIGNMENT == 0 and ei <= placement.arena_bytes
        for bj, (sj, ej) in zip(blocks[i + 1:], spans[i + 1:], strict=True):
            if bi.first <= bj.last and bj.first <= bi.last:
                assert ei <= sj or ej <= si, "live blocks overlap in the arena"
    aligned_live = max(sum(allocator.aligned(b.nbytes) for b in blocks if b.live_at(k)) for k in range(41))
    assert placement.arena_bytes >= aligned_live


# -- report ----------------------------------------------------------------------------------------

def test_report_round_trips_through_json() -> None:
    runtime = RuntimeMemory(arena_runs=(ArenaRun((100, 150, 120, 90), (100, 180, 180, 180), (1024,) * 4),),
                            arena_in_use_before_bytes=50, arena_held_before_bytes=0)
    rep = analyze_memory(branches(), runtime)
    assert rep.max_allocated_bytes == 1024 and rep.max_allocated_source == "arena growth"
    assert [n.workspace_bytes for n in rep.nodes] == [None, 30, None, None]
    doc = orjson.loads(orjson.dumps(rep.to_json()))
    assert doc["peak_bytes"] == 600 and doc["peak_node"] == "C" and doc["max_allocated_bytes"] == 1024
    assert [e["name"] for e in doc["tensors_at_peak"]] == ["c", "b", "a"]
    assert MemoryReport.from_json(doc) == rep
    p = branches()
    p.memory = MemoryReport.from_json(doc)
    assert memory_report(p) == rep


def test_workspace_is_only_reported_where_the_peak_rose() -> None:
    run = ArenaRun(in_use_bytes=(100, 150, 150, None, 160), peak_bytes=(100, 180, 180, None, 200),
                   held_bytes=(0,) * 5)
    assert workspace_bytes(run) == [None, 30, None, None, 40]


def test_hint_when_allocated_far_exceeds_used() -> None:
    big = RuntimeMemory(arena_runs=(ArenaRun((0,) * 4, (0,) * 4, (8 << 20,) * 4),), arena_held_before_bytes=0)
    assert "arena grew 8.00 MiB" in (analyze_memory(branches(), big).hint or "")
    near = RuntimeMemory(arena_runs=(ArenaRun((0,) * 4, (0,) * 4, (700,) * 4),), arena_held_before_bytes=0)
    assert analyze_memory(branches(), near).hint is None


def test_damaged_memory_section() -> None:
    from layerperf.data.codec import sections_from_json

    with pytest.raises(InputError, match="memory section is damaged"):
        sections_from_json({"memory": {"peak_bytes": "many"}})


def test_unnamed_tensors_warn_and_pictures_still_render() -> None:
    import xml.etree.ElementTree as ET

    from layerperf.renderers import svg

    rep = analyze_memory(prof([Layer("A", "Conv", inputs=(t("", 8),), outputs=(t("", 8),))], [], []))
    assert rep.peak_bytes == 0 and "names no tensors" in rep.warnings[0]
    for picture in (svg.flow_svg(rep), svg.memory_timeline_svg(rep)):
        assert ET.fromstring(picture).tag.endswith("svg")


def test_the_picture_numbers_nodes_as_the_terminal_does() -> None:
    # the peak is at C, the third node: "#3 C" on the picture, as the terminal's "node 3 of 4" (was "#2 C")
    from layerperf.renderers import svg
    from layerperf.renderers.views.memory import summary_notes

    rep = analyze_memory(branches())
    picture = svg.memory_timeline_svg(rep).decode("utf-8")
    assert "at #3 C (Conv)" in picture and "#2 C" not in picture
    assert ">1</text>" in picture and ">0</text>" not in picture  # the axis counts from 1 too
    assert any("node 3 of 4" in n.text for n in summary_notes(rep))
