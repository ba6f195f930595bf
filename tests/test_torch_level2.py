"""Level 2 on PyTorch: ops put under the module whose profiler range holds them (checked against what
each module type calls), the wrapped forwards, and the ops' work replayed as level 1 counts it."""

from __future__ import annotations

import inspect
from types import SimpleNamespace
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import layerperf  # noqa: E402
import layerperf.torch as lt  # noqa: E402
from layerperf.backends.base import RunPlan  # noqa: E402
from layerperf.backends.torch import driver  # noqa: E402
from layerperf.backends.torch.hooks import forward_wrappers  # noqa: E402
from layerperf.backends.torch.level2 import Level2Run  # noqa: E402
from layerperf.backends.torch.models import load  # noqa: E402
from layerperf.backends.torch.op_replay import op_cost, op_inputs  # noqa: E402
from layerperf.backends.torch.op_rows import attributed  # noqa: E402
from layerperf.backends.torch.ranges import RUN_MARK, cpu_marks  # noqa: E402
from layerperf.backends.torch.runner import Runner  # noqa: E402
from layerperf.data.tensor import TensorInfo  # noqa: E402


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

# the aten op called at the top of each module type's forward (an independent account of where each op
# belongs: the module that calls it)
OWN_OP = {"Conv2d": "aten::conv2d", "BatchNorm2d": "aten::batch_norm", "ReLU": "aten::relu",
          "MaxPool2d": "aten::max_pool2d", "Linear": "aten::linear", "GELU": "aten::gelu",
          "LayerNorm": "aten::layer_norm", "Conv1d": "aten::conv1d", "AdaptiveAvgPool2d": "aten::adaptive_avg_pool2d"}


@pytest.mark.parametrize("model,zoo", [("resnet18", {"image_size": 32}), ("bert-base", {"seq_len": 16})])
def test_every_op_goes_to_the_module_that_called_it(model: str, zoo: dict[str, int]) -> None:
    """Over several runs (the first recording shapes, as level 2's untimed run): each leaf module of a
    type in OWN_OP holds exactly its one op each call, no op of such a type lands anywhere else, and
    every module range lies inside its parent's and inside the run."""
    torch.set_num_threads(1)
    runner = Runner(load(model, RunPlan(zoo_options=zoo)))
    rec = runner.record()
    index = runner.index(rec)
    layers = driver.layers_from(rec)
    parents = {la.parent for la in layers}
    run = Level2Run(runner, index)
    for k in range(3):
        got = run(shapes=k == 0)
        att = attributed(got.events, layers, 0)
        by_module: dict[str | None, list[str]] = {}
        for op in att.ops:
            by_module.setdefault(op.parent, []).append(op.op)
        checked = 0
        for la in layers:
            own = OWN_OP.get(la.op_type)
            if own is None or la.name in parents:
                continue
            assert by_module.get(la.name) == [own], (la.name, by_module.get(la.name))
            checked += 1
        assert checked > (20 if model == "resnet18" else 30)
        owners = {OWN_OP[la.op_type]: la.op_type for la in layers if la.op_type in OWN_OP}
        for op in att.ops:
            if op.op in owners:
                mod = next(la for la in layers if la.name == op.parent)
                assert mod.op_type == owners[op.op], (op.key, mod.op_type)
        spans = {(i, s0, d) for i, s0, d, _ in att.spans}
        assert {i for i, _, _ in spans} == set(range(len(layers)))
        ends = {i: (s0, s0 + d) for i, s0, d in spans}
        for i, la in enumerate(layers):
            if la.parent is not None:
                p = next(j for j, other in enumerate(layers) if other.name == la.parent)
                assert ends[p][0] <= ends[i][0] and ends[i][1] <= ends[p][1]


def test_a_blocks_own_ops_and_its_childrens() -> None:
    """A module's own code (reshape, softmax in _Block.forward) is its op rows; its children's ops are theirs."""
    runner = Runner(layerperf.backends.torch.models.TorchModel(_Block().eval(), (torch.randn(2, 4, 16),)))
    rec = runner.record()
    layers = driver.layers_from(rec)
    got = Level2Run(runner, runner.index(rec))(shapes=True)
    att = attributed(got.events, layers, 0)
    assert [(op.op, op.parent) for op in att.ops] == [
        ("aten::linear", "fc"), ("aten::gelu", "act"), ("aten::layer_norm", "norm"), ("aten::reshape", None),
        ("aten::conv1d", "conv"), ("aten::softmax", None)]


def test_the_gpus_copies_of_the_ranges_are_not_the_run() -> None:
    """With the CUDA activity the profiler repeats each range on the GPU's timeline, later: the run is
    the CPU's range (the first one otherwise found could be the GPU's copy)."""
    cpu = SimpleNamespace(name=RUN_MARK, device_type=torch.autograd.DeviceType.CPU,
                          time_range=SimpleNamespace(start=5.0, end=9.0))
    gpu = SimpleNamespace(name=RUN_MARK, device_type=torch.autograd.DeviceType.CUDA,
                          time_range=SimpleNamespace(start=1.0, end=20.0))
    assert cpu_marks([gpu, cpu]) == [cpu]


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


def test_op_cost_replays_a_recorded_list_of_tensors() -> None:
    """A list of tensors is recorded as its tensors' dims (``structured_input_shapes``) and, added from the
    profiler's event tree, their element types and identities (``list_tensors``): the op is replayed on it.
    One tensor listed twice is read once; without the element types the bytes stay unknown."""
    def cat(listed: Any) -> Any:
        ev = _Event("aten::cat", [[], []], ["TensorList", "Scalar"], [None, 1])
        ev.structured_input_shapes = [[[4, 8], [4, 8], [4, 2]], []]
        if listed is not None:
            ev.list_tensors = [listed, None]
        return ev

    got = op_cost(cat([("float32", 1), ("float32", 2), ("float16", 3)]))
    assert (got.flops, got.int_ops, got.bytes_read, got.bytes_written) == (0, 0, 4 * (32 + 32) + 2 * 8, 4 * 4 * 18)
    assert op_inputs(cat([("float32", 1), ("float32", 2), ("float16", 3)]), "r") == (
        TensorInfo("r:in0.0", (4, 8), "float32"), TensorInfo("r:in0.1", (4, 8), "float32"),
        TensorInfo("r:in0.2", (4, 2), "float16"))
    twice = op_cost(cat([("float32", 1), ("float32", 1), ("float32", 3)]))
    assert (twice.bytes_read, twice.bytes_written) == (4 * (32 + 8), 4 * 4 * 18)
    assert op_cost(cat(None)).bytes_read is None and op_cost(cat(None)).flops == 0
    assert [t.dtype for t in op_inputs(cat(None), "r")] == ["unknown"] * 3


def test_events_get_their_lists_element_types_from_the_event_tree() -> None:
    """events_with_links adds to an op taking a list of tensors each tensor's element type and identity,
    from the profiler's event tree (the op found by its correlation id)."""
    from layerperf.backends.torch.quiet_profiler import events_with_links

    cpu = torch.autograd.DeviceType.CPU
    cat = SimpleNamespace(id=5, name="aten::cat", device_type=cpu, input_shapes=[[], []],
                          input_dtypes=["TensorList", "Scalar"])
    add = SimpleNamespace(id=6, name="aten::add", device_type=cpu, input_shapes=[[2], [2]],
                          input_dtypes=["float", "float"])
    pieces = [SimpleNamespace(dtype=torch.float32, impl_ptr=10), SimpleNamespace(dtype=torch.bfloat16, impl_ptr=11)]
    node = SimpleNamespace(correlation_id=5, children=[], extra_fields=SimpleNamespace(inputs=[pieces, 1]))
    root = SimpleNamespace(correlation_id=1, children=[node], extra_fields=SimpleNamespace(inputs=[]))
    results = SimpleNamespace(experimental_event_tree=lambda: [root])
    prof = SimpleNamespace(events=lambda: [cat, add], profiler=SimpleNamespace(kineto_results=results))
    assert events_with_links(prof) == [cat, add]
    assert cat.list_tensors == [[("float32", 10), ("bfloat16", 11)], None] and not hasattr(add, "list_tensors")


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


def test_an_older_torchs_events_are_completed_from_kinetos_results() -> None:
    """torch 2.11's events lack input_dtypes and (on a GPU) linked_correlation_id: taken from kineto's
    results, a CPU op by its id where the shapes agree, a kernel by its start and name."""
    from layerperf.backends.torch.quiet_profiler import events_with_links

    cpu, cuda = torch.autograd.DeviceType.CPU, torch.autograd.DeviceType.CUDA
    op = SimpleNamespace(id=7, name="aten::add", device_type=cpu, input_shapes=[[2, 3], [2, 3]])
    other = SimpleNamespace(id=8, name="aten::mul", device_type=cpu, input_shapes=[[4]])
    kernel = SimpleNamespace(id=0, name="add_kernel", device_type=cuda, time_range=SimpleNamespace(start=1.5))

    def k(**kw: Any) -> Any:
        return SimpleNamespace(**{name: (lambda v=v: v) for name, v in kw.items()})

    kineto = [k(correlation_id=7, device_type=cpu, shapes=[[2, 3], [2, 3]], dtypes=["float", "float"],
                start_ns=1000, name="aten::add", linked_correlation_id=0),
              k(correlation_id=8, device_type=cpu, shapes=[[5]], dtypes=["int"], start_ns=1200, name="aten::mul",
                linked_correlation_id=0),
              k(correlation_id=99, device_type=cuda, shapes=[], dtypes=[], start_ns=1000 + 1500, name="add_kernel",
                linked_correlation_id=7)]
    results = SimpleNamespace(trace_start_ns=lambda: 1000, events=lambda: kineto)
    prof = SimpleNamespace(events=lambda: [op, other, kernel], profiler=SimpleNamespace(kineto_results=results))
    assert events_with_links(prof) == [op, other, kernel]
    assert op.input_dtypes == ["float", "float"] and kernel.linked_correlation_id == 7
    assert not hasattr(other, "input_dtypes")  # its recorded shapes disagree: left unknown


class _Recursive(torch.nn.Module):
    """Calls itself ``depth`` times: one ``add`` a call, a ``mul`` at the bottom."""

    def forward(self, x: Any, depth: int = 3) -> Any:
        return self(x + 1, depth - 1) if depth else x * 2


class _Outer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rec = _Recursive()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x: Any) -> Any:
        return self.fc(self.rec(x))


def test_a_module_calling_itself_keeps_every_call() -> None:
    """torch's event list folds a range into a same-named parent that has no other child: each nested
    call's range is named apart, so all 4 calls are spans and all 3 adds and the mul are the module's."""
    runner = Runner(layerperf.backends.torch.models.TorchModel(_Outer().eval(), (torch.randn(2, 4),)))
    rec = runner.record()
    layers = driver.layers_from(rec)
    got = Level2Run(runner, runner.index(rec))(shapes=False)
    att = attributed(got.events, layers, 0)
    rec_layer = next(i for i, la in enumerate(layers) if la.name == "rec")
    assert sum(1 for i, _, _, _ in att.spans if i == rec_layer) == 4
    assert [(op.op, op.parent) for op in att.ops] == [("aten::add", "rec")] * 3 + [("aten::mul", "rec"),
                                                                                ("aten::linear", "fc")]


class _Threaded(torch.nn.Module):
    """Runs its first submodule on a thread of its own."""

    def __init__(self) -> None:
        super().__init__()
        self.side = torch.nn.Linear(4, 4)
        self.main = torch.nn.Linear(4, 4)

    def forward(self, x: Any) -> Any:
        import threading

        out: list[Any] = []
        t = threading.Thread(target=lambda: out.append(self.side(x)))
        t.start()
        t.join()
        return self.main(out[0])


def test_a_module_run_on_another_thread_leaves_the_ranges_whole() -> None:
    """Each thread opens and closes its own ranges (a range closed on another thread than it opened on
    trips torch's internal assert): the run completes, the main thread's op is under its module."""
    runner = Runner(layerperf.backends.torch.models.TorchModel(_Threaded().eval(), (torch.randn(2, 4),)))
    rec = runner.record()
    layers = driver.layers_from(rec)
    run = Level2Run(runner, runner.index(rec))
    for _ in range(2):
        got = run(shapes=False)
        att = attributed(got.events, layers, 0)
        assert ("aten::linear", "main") in [(op.op, op.parent) for op in att.ops]
