"""Level 2 on PyTorch: ops put under their modules by the hooks' stamps on the profiler's clock (checked
against profiler ranges, the attribution that needs no clocks), the clocks' map and its refinement,
the wrapped forwards, and the ops' work replayed as level 1 counts it."""

from __future__ import annotations

import bisect
import inspect
from types import SimpleNamespace
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import layerperf  # noqa: E402
import layerperf.torch as lt  # noqa: E402
from layerperf.backends.base import RunPlan  # noqa: E402
from layerperf.backends.torch.driver import Session  # noqa: E402
from layerperf.backends.torch.hooks import forward_wrappers  # noqa: E402
from layerperf.backends.torch.models import load  # noqa: E402
from layerperf.backends.torch.ops import (  # noqa: E402
    MARK,
    RUN_MARK,
    TICK_MARK,
    Level2Run,
    Ticks,
    _marks,
    _ops,
    _refine,
    _top_ops,
    clock_map,
    op_cost,
)


class _Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(16, 32)
        self.act = torch.nn.GELU()
        self.norm = torch.nn.LayerNorm(32)
        self.conv = torch.nn.Conv1d(4, 8, 3, padding=1)

    def forward(self, x: Any) -> Any:
        y = self.norm(self.act(self.fc(x)))
        return self.conv(y.reshape(2, 4, 32)).softmax(-1)


# -- attribution ------------------------------------------------------------------------------------

def _ranges_truth(events: Any, names: list[str]) -> list[tuple[str, str | None]]:
    """Each op called with no aten op running, with the module whose profiler range it ran under."""
    run = next(e for e in events if e.name == RUN_MARK)
    out = []
    for ev in _top_ops(events, run.thread, run.time_range.start, run.time_range.end):
        up = ev.cpu_parent
        while up is not None and not (up.name.startswith(MARK) and up.name[len(MARK):].isdigit()):
            up = up.cpu_parent
        out.append((ev.name, names[int(up.name[len(MARK):])] if up is not None else None))
    return out


@pytest.mark.parametrize("model,zoo", [("resnet18", {"image_size": 32}), ("bert-base", {"seq_len": 16}),
                                       ("block", {})])
def test_stamps_put_every_op_under_the_module_its_range_says(model: str, zoo: dict[str, int]) -> None:
    """Each module marked both ways in the same runs: stamped on the profiler's clock (level 2) and as a
    profiler range; the op's module by the stamps is the range holding it, for every op of every run."""
    from layerperf.backends.torch.models import TorchModel

    torch.set_num_threads(1)
    loaded = TorchModel(_Block().eval(), (torch.randn(2, 4, 16),)) if model == "block" else \
        load(model, RunPlan(zoo_options=zoo))
    session = Session(loaded)
    rec = session.record()
    index = session.index(rec)
    layers = layerperf.backends.torch.driver.layers_from(rec)
    names = [layer.name for layer in layers]
    run = Level2Run(session, index)
    start, stop = _marks(index)
    stamp_start, stamp_stop = run.stamps.start, run.stamps.stop

    def both_start(i: int) -> None:
        stamp_start(i)
        start(i)

    def both_stop(i: int) -> None:
        stop(i)
        stamp_stop(i)

    run.stamps.start, run.stamps.stop = both_start, both_stop
    for k in range(3):  # with the ops' shapes recorded, and without (as level 2's timed runs)
        rec = run(shapes=k == 0)
        events = rec.events
        att = _ops(events, layers, rec.stamped, 0)
        assert att.cut == 0
        aten = [op for op in att.ops if op.domain == "aten"]
        truth = _ranges_truth(events, names)
        assert len(truth) > (5 if model == "block" else 20)
        assert [(op.op, op.parent) for op in aten] == truth
        # a run with no ranges (as level 2's own): the same ops under the same modules
        bare = Level2Run(session, index)
        plain = bare(shapes=k == 0)
        alone = _ops(plain.events, layers, plain.stamped, 0)
        assert alone.cut == 0 and [(op.op, op.parent) for op in alone.ops if op.domain == "aten"] == truth
        # the modules' spans hold their ops
        span = {i: (s, s + d) for i, s, d, _ in att.spans}
        by_name = {n: i for i, n in enumerate(names)}
        for op in aten:
            if op.parent is not None:
                s, e = span[by_name[op.parent]]
                assert s <= op.start_ns and op.start_ns + op.dur_ns <= e


def _ev(name: str, start_us: float, end_us: float) -> Any:
    return SimpleNamespace(name=name, time_range=SimpleNamespace(start=start_us, end=end_us))


def test_clock_map_goes_through_both_ticks() -> None:
    events = [_ev(RUN_MARK, 0.0, 100.0), _ev(TICK_MARK, 1.0, 1.5), _ev(TICK_MARK, 90.0, 90.5)]
    to_prof = clock_map(events, Ticks(1000.0, 1000.0 + 2 * 89_000, 0.0))  # the hooks' clock at 2 ticks per ns
    assert to_prof(1000.0) == pytest.approx(1250.0) and to_prof(1000.0 + 2 * 89_000) == pytest.approx(90_250.0)
    assert to_prof(1000.0 + 2 * 10_000) == pytest.approx(11_250.0)
    with pytest.raises(ValueError):
        clock_map(events[:2], Ticks(0.0, 1.0, 0.0))


def _between(x: float, starts: list[float], ends: list[float]) -> bool:
    return not any(a < x < b for a, b in zip(starts, ends, strict=True))


def test_refine_moves_the_boundaries_into_the_gaps() -> None:
    # ops at [10,20], [30,40], [50,60] µs; modules around them but stamped 3 µs late (the map's error
    # up to 5 µs): shifts from -4 to -2 µs put every boundary between ops, and the middle one is taken
    us = 1000.0
    starts, ends = [10 * us, 30 * us, 50 * us], [20 * us, 40 * us, 60 * us]
    stamped = [12 * us, 24 * us, 32 * us, 64 * us]
    fix, cut = _refine(stamped, starts, ends, 5 * us)
    assert cut == 0 and [fix(x) for x in stamped] == pytest.approx([9 * us, 21 * us, 29 * us, 61 * us])
    fix, cut = _refine([9 * us, 21 * us, 45 * us], starts, ends, 5 * us)
    assert cut == 0 and all(_between(fix(x), starts, ends) for x in (9 * us, 21 * us, 45 * us))
    # one boundary must go 2 µs left, another 3 µs right, the map's error 1 µs: nothing places both, and
    # the ones inside an op are counted
    fix, cut = _refine([12 * us, 37 * us, 41 * us], starts, ends, 1 * us)
    assert cut == 2 and fix(12 * us) == 12 * us
    # the same boundaries, stamped 3 µs late but the map's error said to be 1 µs: not moved that far
    fix, cut = _refine(stamped, starts, ends, 1 * us)
    assert cut == 2


def test_refine_takes_out_a_drift_across_the_run() -> None:
    """The ticks place each end of the run within a few µs, so the map can drift by that much across it:
    100 ops with 200 ns between them, each followed by a module boundary, stamped with a drift of
    ±400 ns from the middle — no shift alone places them all, a shift and a tilt do."""
    starts = [k * 1000.0 + 100 for k in range(100)]
    ends = [k * 1000.0 + 900 for k in range(100)]
    true = [k * 1000.0 + 950 for k in range(100)]
    stamped = [t + 8e-3 * (t - 50_000) + 30 for t in true]
    assert sum(not _between(x, starts, ends) for x in stamped) > 50
    fix, cut = _refine(stamped, starts, ends, 1000.0)
    assert cut == 0 and all(_between(fix(x), starts, ends) for x in stamped)
    # each in the gap its true boundary is in (where in the gap, the ops cannot tell)
    assert all(bisect.bisect(starts, fix(x)) == bisect.bisect(starts, t) for x, t in zip(stamped, true, strict=True))


# -- the wrapped forwards ---------------------------------------------------------------------------

def test_forward_wrappers_mark_each_call_and_put_forward_back() -> None:
    lin, seq = torch.nn.Linear(2, 2), torch.nn.Sequential()
    own = lambda x: x * 2  # noqa: E731  # a forward the module had as its own attribute
    seq.forward = own  # type: ignore[method-assign]
    marks: list[tuple[str, int]] = []
    with forward_wrappers([(lin, 0), (seq, 1)], lambda i: marks.append(("start", i)),
                          lambda i: marks.append(("stop", i))):
        assert list(inspect.signature(lin.forward).parameters) == ["input"]
        lin(torch.ones(1, 2))
        assert seq(3) == 6
        with pytest.raises(RuntimeError):
            lin(torch.ones(1, 3))  # the forward raises: its stop is still called
    assert marks == [("start", 0), ("stop", 0), ("start", 1), ("stop", 1), ("start", 0), ("stop", 0)]
    assert "forward" not in lin.__dict__ and seq.__dict__["forward"] is own


# -- the ops' work ----------------------------------------------------------------------------------

class _Event:
    """What ops.py reads of a torch.profiler event to cost it."""

    def __init__(self, name: str, shapes: list[Any], dtypes: list[str], concrete: list[Any] | None = None,
                 children: list[_Event] | None = None, strides: list[Any] | None = None) -> None:
        self.name, self.input_shapes, self.input_dtypes = name, shapes, dtypes
        self.structured_input_strides = strides or []
        self.concrete_inputs = concrete or [None] * len(shapes)
        self.cpu_children = children or []


def test_op_cost_replays_the_recorded_call() -> None:
    cumsum = op_cost(_Event("aten::cumsum", [[2, 5], [], []], ["long int", "Scalar", ""], [None, 1, None]))
    assert (cumsum.flops, cumsum.int_ops) == (0, 10)  # a scan over integers: 1 integer operation per element
    add = op_cost(_Event("aten::add", [[2, 1], [1, 5], []], ["long int", "long int", "Scalar"], [None, None, 1]))
    assert (add.flops, add.int_ops, add.bytes_read, add.bytes_written) == (0, 10, 56, 80)  # broadcast output
    mm = op_cost(_Event("aten::mm", [[4, 8], [8, 2]], ["float", "float"]))
    assert (mm.flops, mm.int_ops, mm.bytes_read, mm.bytes_written) == (128, 0, 192, 32)
    relu = op_cost(_Event("aten::relu", [[4, 8]], ["c10::BFloat16"]))
    assert (relu.flops, relu.bytes_read) == (32, 64)  # 1 FLOP per element, as the cost model's Relu
    view = op_cost(_Event("aten::view", [[4, 8], []], ["float", "ScalarList"], [None, [32]]))
    assert (view.flops, view.int_ops, view.bytes_read, view.bytes_written) == (0, 0, 0, 0)
    # an enum recorded as its integer (memory_format=contiguous_format); the strides tell a transposed
    # view (copied: 256 bytes each way) from a contiguous tensor (returned as it is)
    contiguous = op_cost(_Event("aten::contiguous", [[2, 8, 4], []], ["float", "Scalar"], [None, 0],
                                strides=[[32, 1, 8], []]))
    assert contiguous.bytes_read == contiguous.bytes_written == 256
    already = op_cost(_Event("aten::contiguous", [[2, 8, 4], []], ["float", "Scalar"], [None, 0]))
    assert already.bytes_read == already.bytes_written == 0
    gelu = op_cost(_Event("aten::gelu", [[2, 4], []], ["float", ""]))  # approximate: a string, not recorded
    assert gelu.flops is not None and gelu.flops > 0


def test_op_cost_falls_back_on_the_ops_it_called() -> None:
    mm = _Event("aten::bmm", [[2, 3, 4], [2, 4, 5]], ["float", "float"])
    einsum = _Event("aten::einsum", [[], [], []], ["", "TensorList", ""], children=[mm])  # the equation is lost
    assert op_cost(einsum).flops == 2 * 2 * 3 * 4 * 5
    cat = op_cost(_Event("aten::cat", [[], []], ["TensorList", "Scalar"], [None, 0]))
    assert (cat.flops, cat.int_ops, cat.bytes_read) == (0, 0, None)  # moves data only: bytes unknown
    odd = op_cost(_Event("aten::not_an_op", [[2]], ["float"]))
    assert (odd.flops, odd.int_ops, odd.bytes_read) == (None, None, None)


def test_op_rows_count_what_level_1_counts_for_their_module() -> None:
    """A leaf module's work at level 1 (its aten ops counted as they ran) equals the sum of its op rows'
    at level 2 (each op replayed from what the profiler recorded)."""
    model, x = _Block().eval(), torch.randn(2, 4, 16)
    figures = {}
    for level in (1, 2):
        with lt.Profiler(level=level) as prof:
            model(x)
        figures[level] = prof.profile
    one, two = figures[1], figures[2]
    for name in ("fc", "act", "norm", "conv"):
        module = next(layer for layer in one.layers if layer.name == name)
        rows = [layer for layer in two.layers if layer.parent == name]
        assert rows, name
        assert sum(r.flops or 0 for r in rows) == module.flops and all(r.flops is not None for r in rows), name
        assert sum(r.bytes_read or 0 for r in rows) == module.bytes_read, name
    top = [layer for layer in two.layers if layer.parent is None and layer.domain == "aten"]
    assert [layer.op_type for layer in top] == ["aten::reshape", "aten::softmax"]  # the model's own ops
    assert not [w for w in two.warnings if "boundar" in w or "replayed" in w]


class _Switch(torch.nn.Module):
    """Takes another path from its second call on."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.calls = 0

    def forward(self, x: Any) -> Any:
        self.calls += 1
        y = self.fc(x)
        return y.relu() if self.calls == 1 else y.sigmoid()


def test_shapes_come_from_the_first_run_and_an_op_it_did_not_call_is_unknown() -> None:
    """The decorator's first call records the ops' shapes, the later ones do not (cheaper): an op only
    the later calls made has no inputs and unknown work, and the profile says so."""
    model, x = _Switch().eval(), torch.randn(2, 4)

    @lt.profile(level=2)
    def step() -> None:
        with torch.inference_mode():
            model(x)

    for _ in range(3):
        step()
    prof = step.profiler.stop()  # type: ignore[attr-defined]
    by_name = {layer.name: layer for layer in prof.layers}
    relu, sigmoid, linear = by_name["aten::relu"], by_name["aten::sigmoid"], by_name["fc/aten::linear"]
    assert relu.inputs and relu.flops == 8 and linear.flops == 2 * 2 * 4 * 4 + 2 * 4
    assert sigmoid.inputs == () and sigmoid.flops is None and sigmoid.bytes_read is None
    assert len(prof.durations_ns(list(prof.layers).index(sigmoid))) == 2  # timed all the same
    assert any("did not run in the run that recorded shapes" in w for w in prof.warnings)
