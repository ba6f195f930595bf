"""The cost model's namespaces: one aten table for live calls and recorded ones, and the registry."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from layerperf import cost
from layerperf.cost import aten
from layerperf.cost.aten import recorded
from layerperf.data.cost import UNKNOWN, Cost
from layerperf.data.tensor import TensorInfo

ROOT = Path(__file__).resolve().parent.parent


def _t(shape: tuple[int, ...], name: str, dtype: str = "float32") -> TensorInfo:
    return TensorInfo(name, shape, dtype)


def _recorded(name: str, dims: Any, types: Any, concrete: Any) -> Cost:
    return recorded.cost(name, orjson.dumps(dims), orjson.dumps(types), orjson.dumps(concrete))


def test_one_namespace_entry_for_onnx_and_aten() -> None:
    x, w, y = _t((1, 3, 8, 8), "x"), _t((4, 3, 3, 3), "w"), _t((1, 4, 6, 6), "y")
    onnx_conv = cost.of("ai.onnx", "Conv", [x, w], [y])
    assert onnx_conv == cost.of("", "Conv", [x, w], [y]) == cost.of("onnx", "Conv", [x, w], [y])
    # aten: the positional arguments (tensors and scalars), the results; counted as the ONNX op
    aten_conv = cost.of("aten", "convolution", [x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1], [y])
    assert aten_conv == onnx_conv
    assert cost.covers("aten", "relu_") and cost.covers("ai.onnx", "Conv") and cost.covers("com.microsoft", "FusedConv")
    assert not cost.covers("aten", "frobnicate") and not cost.covers("example.custom", "Frobnicate")
    assert {("aten", "convolution"), ("", "Conv")} <= cost.known_ops()


def test_unknown_is_none_never_zero() -> None:
    x = _t((2, 3), "x")
    custom = cost.of("example.custom", "Frobnicate", [x], [_t((2, 3), "y")])
    assert (custom.flops, custom.int_ops, custom.bytes) == (None, None, 48)  # its tensors are still known
    assert cost.of("aten", "frobnicate", [x], [_t((2, 3), "y")]).flops is None
    assert cost.of("aten", "relu", [x]) == UNKNOWN  # results not recorded and not inferable
    unrecorded = cost.of("ai.onnx", "Relu", [x])  # an ONNX node whose outputs are not given
    assert (unrecorded.flops, unrecorded.bytes_read, unrecorded.bytes_written) == (6, 24, None)


def test_a_namespace_plugs_in() -> None:
    class Kernels:
        """A backend's kernels costed as the sum of the ONNX nodes each fuses."""

        def cost(self, namespace: str, op: str, inputs: Any, outputs: Any, attrs: Any) -> Cost:
            parts = [cost.of("ai.onnx", node, inputs, outputs) for node in attrs["nodes"]]
            return Cost(sum(p.flops or 0 for p in parts), parts[0].bytes_read, parts[-1].bytes_written, 0)

        def knows(self, namespace: str, op: str) -> bool:
            return op.startswith("fused_")

        def ops(self) -> set[tuple[str, str]]:
            return {("kernels.test", "fused_add_relu")}

    cost.register("kernels.test", Kernels())
    a, b = _t((4, 4), "a"), _t((4, 4), "b")
    fused = cost.of("kernels.test", "fused_add_relu", [a, b], [_t((4, 4), "y")], {"nodes": ["Add", "Relu"]})
    assert fused.flops == 16 + 16 and cost.covers("kernels.test", "fused_add_relu")
    assert ("kernels.test", "fused_add_relu") in cost.known_ops()


@pytest.mark.parametrize(("name", "dims", "types", "concrete", "live"), [
    ("aten::conv2d", [[1, 4, 9, 9], [6, 2, 3, 3], [6], [], [], [], []],
     ["float", "float", "float", "ScalarList", "ScalarList", "ScalarList", "Scalar"],
     ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "2"], "conv2d"),
    ("aten::linear", [[2, 5, 8], [3, 8], [3]], ["float"] * 3, [""] * 3, "linear"),
    ("aten::addmm", [[3], [4, 8], [8, 3], [], []], ["float", "float", "float", "Scalar", "Scalar"],
     ["", "", "", "1", "1"], "addmm"),
    ("aten::bmm", [[2, 4, 8], [2, 8, 3]], ["c10::Half"] * 2, ["", ""], "bmm"),
])
def test_a_recorded_call_costs_what_the_same_call_costs_live(name: str, dims: Any, types: Any, concrete: Any,
                                                              live: str) -> None:
    """The trace reader and the torch backend use one table: a call costs the same from the tensors
    that ran as from what a profiler trace recorded of its inputs."""
    torch = pytest.importorskip("torch")
    from layerperf.cost.aten.live import cost as live_cost

    dtype = {"float": torch.float32, "c10::Half": torch.float16}[types[0]]
    tensors = [torch.randn(*d, dtype=dtype) if d else None for d in dims[:3]]
    if live == "conv2d":
        func, args = torch.ops.aten.convolution.default, (*tensors, [2, 2], [1, 1], [1, 1], False, [0, 0], 2)
    elif live == "linear":
        func, args = torch.ops.aten.addmm.default, (tensors[2], tensors[0].reshape(10, 8), tensors[1].t())
    elif live == "addmm":
        func, args = torch.ops.aten.addmm.default, tuple(tensors)
    else:
        func, args = torch.ops.aten.bmm.default, tuple(tensors[:2])
    out = func(*args)
    from_trace, from_live = _recorded(name, dims, types, concrete), live_cost(func, args, {}, out)
    assert from_trace.flops == from_live.flops and from_trace.flops
    assert from_trace.bytes == from_live.bytes


def test_convolution_backward_as_flop_counter_counts_it() -> None:
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import flop_registry

    from layerperf.cost.aten.live import call

    func = torch.ops.aten.convolution_backward.default
    cases = [((2, 4, 9, 9), (6, 2, 3, 3), [2, 2], False, 2, (True, True, True)),
             ((1, 3, 7, 7), (3, 5, 3, 3), [1, 1], True, 1, (True, True, False)),
             ((1, 4, 8, 8), (4, 4, 1, 1), [1, 1], False, 1, (False, True, True))]
    for x_shape, w_shape, stride, transposed, groups, mask in cases:
        x, w = torch.randn(x_shape), torch.randn(w_shape)
        y = torch.ops.aten.convolution(x, w, None, stride, [0, 0], [1, 1], transposed, [0, 0], groups)
        args = (torch.randn_like(y), x, w, [w_shape[0]], stride, [0, 0], [1, 1], transposed, [0, 0], groups, list(mask))
        out = func(*args)
        expected = int(flop_registry[func.overloadpacket](*args, out_val=out)) + (y.numel() if mask[2] else 0)
        assert aten.cost(call(func, args, {}, out)).flops == expected


def test_the_trace_reader_needs_no_torch(tmp_path: Path) -> None:
    """A PyTorch trace's convolutions are costed where torch is not installed."""
    script = ("import sys; sys.modules['torch'] = None\n"
              "from layerperf.readers.detect import read_table\n"
              "t = read_table(sys.argv[1])\n"
              "import numpy as np; print(int(np.nansum(t.flops)))\n")
    trace = ROOT / "tests" / "data" / "torch_cpu" / "trace.json.gz"
    run = subprocess.run([sys.executable, "-c", script, str(trace)], capture_output=True, text=True,
                         env={"PYTHONPATH": str(ROOT / "src")}, check=False)
    assert run.returncode == 0, run.stderr
    assert int(run.stdout) > 0


def test_recorded_scalars_and_missing_types() -> None:
    conv = ["", "", "", "[1, 1]", "[0, 0]", "[1, 1]", "False", "[0, 0]", "1"]
    dims = [[1, 2, 5, 5], [3, 2, 3, 3], [], [], [], [], [], [], []]
    known = _recorded("aten::convolution", dims, ["float", "float", ""], conv)
    assert known.flops == 2 * 3 * 9 * 2 * 9 and known.bytes == 4 * (50 + 54 + 27)
    untyped = _recorded("aten::convolution", dims, [], conv)  # FLOPs counted, bytes unknown
    assert untyped.flops == known.flops and untyped.bytes is None
    assert _recorded("aten::relu", [[2, 3]], ["float"], [""]) == UNKNOWN  # its result does not follow


def test_cat_and_stack_results_follow_from_their_list_of_tensors() -> None:
    """cat and stack take a list of tensors; their results follow from it, so a call whose results were not
    recorded (a profiler trace's) is costed, 0 FLOPs and the bytes of what they read and write, as the same
    call that ran."""
    torch = pytest.importorskip("torch")
    from layerperf.cost.aten.call import AtenCall
    from layerperf.cost.aten.live import cost as live_cost

    a, b, empty = torch.randn(2, 3), torch.randn(2, 5), torch.tensor([])
    cases = [(torch.ops.aten.cat.default, ([a, b], 1)), (torch.ops.aten.cat.default, ([a, b], -1)),
             (torch.ops.aten.cat.default, ([empty, a.flatten(), empty], 0)),  # legacy empty pieces take no part
             (torch.ops.aten.stack.default, ([a, a * 2, a], 1)), (torch.ops.aten.stack.default, ([b, b], -1))]
    for func, (pieces, dim) in cases:
        listed = tuple(_t(tuple(p.shape), f"#{id(p)}") for p in pieces)  # one tensor listed twice is read once
        unrecorded = aten.cost(AtenCall(func.overloadpacket.__name__, (listed, dim)))
        ran = live_cost(func, (pieces, dim), {}, func(pieces, dim))
        assert unrecorded == ran and (unrecorded.flops, unrecorded.int_ops) == (0, 0) and unrecorded.bytes
    # pieces that do not join, or of two element types, leave the results (and so the cost) unknown
    assert aten.cost(AtenCall("cat", ((_t((2, 3), "a"), _t((3, 3), "b")), 1))) == UNKNOWN
    assert aten.cost(AtenCall("stack", ((_t((2, 3), "a"), _t((2, 4), "b")), 0))) == UNKNOWN
    assert aten.cost(AtenCall("cat", ((_t((2, 3), "a"), _t((2, 3), "b", "float16")), 0))).bytes is None


def test_a_recorded_list_of_tensors() -> None:
    """A profiler trace records a list of tensors as its tensors' dims, with no element type: cat is
    0 FLOPs, its bytes unknown (its only tensors are the list's); a typed argument of the call gives the
    list its type (stack's ``out=``)."""
    cat = _recorded("aten::cat", [[[4, 256], [4, 256]], []], ["TensorList", "Scalar"], ["", "1"])
    assert (cat.flops, cat.int_ops, cat.bytes) == (0, 0, None)
    typed = _recorded("aten::stack", [[[4, 8], [4, 8]], [], [2, 4, 8]], ["TensorList", "Scalar", "float"],
                      ["", "0", ""])
    assert (typed.flops, typed.bytes_read, typed.bytes_written) == (0, 2 * 4 * 8 * 4 + 2 * 4 * 8 * 4, 2 * 4 * 8 * 4)


def test_a_torch_trace_reads_its_lists_of_tensors(tmp_path: Path) -> None:
    """``layerperf analyze`` of a torch.profiler trace (record_shapes): cat's row shows its list's shapes
    and is 0 FLOPs, known."""
    torch = pytest.importorskip("torch")
    from torch.profiler import profile

    from layerperf.readers.detect import read_table

    x = torch.randn(4, 256)
    with profile(record_shapes=True) as prof:
        torch.cat([x, x * 2], 1)
    prof.export_chrome_trace(str(tmp_path / "trace.json"))
    table = read_table(str(tmp_path / "trace.json"))
    rows = [i for i in range(len(table.flops)) if table.name[i] == "aten::cat"]
    assert rows and all(table.flops[i] == 0 and table.in_shapes[i] == "4x256;4x256" for i in rows)
