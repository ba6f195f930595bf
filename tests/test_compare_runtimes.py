"""Layers set side by side across runtimes without running any: the names TVM's kernels get, a fused
kernel paired with the ONNX nodes it covers (``diff``'s ``covers`` rule), and ``compare``'s rows —
groups of layers joined by pairings and by what a kernel covers — with each runtime's time, the
fastest and the totals. Names are as real profiles of the zoo's resnet18 have them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest

from layerperf.analysis.compare import compare, per_run_us
from layerperf.analysis.matching import Node, pair_nodes
from layerperf.backends.tvm.calls import CallSite
from layerperf.backends.tvm.naming import kernel_name, layer_names, short, unique
from layerperf.data.calls import Calls, Labels
from layerperf.data.extension import TvmKernel
from layerperf.data.layer import Layer
from layerperf.data.schedule import KernelSchedule, Loop, Placement, Tile, default_schedule


def test_a_fused_kernel_is_named_after_its_anchor_and_the_nodes_it_covers() -> None:
    names = ["layer1.0.conv2", "layer1.0.bn2", "layer1.0.add", "layer1.0.relu2"]
    assert kernel_name([1, 2, 3], names, 1) == "layer1.0.bn2+add+relu2"
    assert short("/encoder/layer.0/output/dense/Add", "/encoder/layer.0/output/dense/MatMul") == "Add"
    assert short("relu", "bn1") == "relu"
    assert unique(["a", "b", "a", "a"]) == ["a", "b", "a#2", "a#3"]


def test_layer_names_of_kernels_helpers_and_builtins() -> None:
    node_names = ["clip", "conv", "relu"]
    sites = [CallSite(0, "vm.builtin.check_tensor_info"), CallSite(1, "vm.builtin.alloc_tensor", serves=2),
             CallSite(2, "fused_conv2d_relu", (1, 2), 2), CallSite(3, "maximum", (0,), 1),
             CallSite(4, "minimum", (0,), 1), CallSite(5, "vm.builtin.null_value", serves=4)]
    owner = {0: 4, 1: 2, 2: 2}  # node -> the call writing its output
    names, anchors = layer_names(sites, sites, node_names, [10, 100, 1], owner)
    assert names == ["vm/check_tensor_info", "conv+relu/alloc_tensor", "conv+relu", "clip:maximum", "clip",
                     "clip/null_value"]
    assert anchors == [None, None, 1, 0, 0, None]


def _node(name: str, op: str, covers: tuple[str, ...] = (), outputs: tuple[str, ...] = ()) -> Node:
    return Node(name, op, outputs, covers=covers)


# ONNX Runtime at --opt-level basic (BN folded into the convolutions) and TVM's default pipeline
ORT = [_node("conv1", "Conv"), _node("relu", "Relu"), _node("layer1.0.conv1", "Conv"),
       _node("layer1.0.relu1", "Relu")]
TVM = [_node("conv1", "Conv", ("conv1",)), _node("bn1+relu", "BatchNormalization", ("bn1", "relu")),
       _node("layer1.0.conv1", "Conv", ("layer1.0.conv1",)),
       _node("layer1.0.bn1+relu1", "BatchNormalization", ("layer1.0.bn1", "layer1.0.relu1"))]


def test_covers_pairs_a_node_with_the_kernel_of_its_family_that_computes_it() -> None:
    ort = [_node("relu_nchwc", "Conv"), _node("fc", "Gemm")]
    tvm = [_node("conv1", "Conv", ("conv1", "bn1", "relu")), _node("fc", "Gemm", ("fc",))]
    pairing = pair_nodes(ort, tvm)
    assert {(i, j, rule) for i, j, rule in pairing.pairs} == {(0, 0, "covers"), (1, 1, "exact")}
    assert pairing.counts()["covers"] == 1
    # not across families: ONNX Runtime's Relu is no batch-norm kernel, though that kernel covers it
    assert (1, 1, "covers") not in pair_nodes(ORT, TVM).pairs


def test_a_kernel_is_scoped_by_its_anchor() -> None:
    ort = [_node("layer2.0.relu1_nchwc", "Conv"), _node("layer2.0.downsample.1_nchwc", "Conv")]
    tvm = [_node("layer2.0.downsample.0", "Conv", ("layer2.0.downsample.0",)),
           _node("layer2.0.conv1+x", "Conv", ("layer2.0.conv1",))]
    assert {rule for _, _, rule in pair_nodes(ort, tvm).pairs} == {"scope"}


def _calls(rows: list[tuple[str, str, float]], covers: dict[str, tuple[str, ...]] | None = None,
           runs: int = 2) -> Calls:
    """A per-layer table: (name, op type, µs per call), each layer called once per run."""
    n = len(rows)
    nan = np.full(n, np.nan)
    return Calls(name=Labels.of([r[0] for r in rows]), op_type=Labels.of([r[1] for r in rows]),
                 provider=Labels.of(["cpu"] * n), in_shapes=Labels.of([""] * n), out_shapes=Labels.of([""] * n),
                 dur_ns=np.array([r[2] * 1e3 for r in rows]), total_ns=np.array([r[2] * 1e3 * runs for r in rows]),
                 incl_ns=nan.copy(), device_ns=nan.copy(), device_incl_ns=nan.copy(),
                 calls=np.full(n, runs, dtype=np.int64), flops=nan.copy(), bytes=nan.copy(), int_ops=nan.copy(),
                 meta={"runs": runs, **({"covers": covers} if covers else {})})


def test_compare_groups_the_nodes_a_fused_kernel_covers() -> None:
    ort = _calls([("conv1", "Conv", 10.0), ("relu", "Relu", 2.0), ("maxpool", "MaxPool", 3.0)])
    tvm = _calls([("conv1", "Conv", 30.0), ("bn1+relu", "BatchNormalization", 4.0), ("maxpool", "MaxPool", 1.0),
                  ("vm/alloc", "alloc_storage", 0.5)],
                 covers={"conv1": ("conv1",), "bn1+relu": ("bn1", "relu"), "maxpool": ("maxpool",)})
    c = compare({"onnxruntime": ort, "tvm": tvm}, latency_ms={"onnxruntime": 0.02, "tvm": None})
    by_key = {r.key: r for r in c.rows}
    assert by_key["conv1"].layers == {"onnxruntime": ("conv1",), "tvm": ("conv1",)}
    assert by_key["relu"].layers == {"onnxruntime": ("relu",), "tvm": ("bn1+relu",)}
    assert by_key["relu"].time_us == {"onnxruntime": 2.0, "tvm": 4.0} and by_key["relu"].fastest == "onnxruntime"
    assert by_key["maxpool"].fastest == "tvm"
    alone = by_key["vm/alloc"]
    assert alone.layers == {"tvm": ("vm/alloc",)} and alone.time_us["onnxruntime"] is None and alone.fastest is None
    assert c.total_us == {"onnxruntime": 15.0, "tvm": 35.5} and c.fastest_total() == "onnxruntime"
    assert c.layers == {"onnxruntime": 3, "tvm": 4} and c.grouped == {"onnxruntime": 3, "tvm": 3}
    types = {r.key: r.time_us for r in c.types}
    assert types["Conv"] == {"onnxruntime": 10.0, "tvm": 30.0} and types["Relu"] == {"onnxruntime": 2.0, "tvm": None}
    doc = c.to_json()
    assert doc["totals"]["latency_ms"] == {"onnxruntime": 0.02, "tvm": None}
    assert doc["rows"][0] == {"key": "conv1", "op_type": "Conv", "layers": {"onnxruntime": ["conv1"],
                              "tvm": ["conv1"]}, "time_us": {"onnxruntime": 10.0, "tvm": 30.0},
                              "fastest": "onnxruntime", "comparable": True}
    # Relu shares a row with TVM's BatchNormalization kernel (bn1+relu): neither type names a fastest
    kinds = {r.key: r for r in c.types}
    assert not kinds["Relu"].comparable and kinds["Relu"].fastest is None
    assert not kinds["BatchNormalization"].comparable
    assert kinds["Conv"].comparable and kinds["Conv"].fastest == "onnxruntime"


def test_an_op_type_fused_into_another_types_layers_names_no_fastest() -> None:
    # ONNX Runtime runs MatMul and its Add apart; TVM's kernel holds both (a MatMul): ONNX Runtime's Add row
    # holds work that TVM's Add row (the one Add it ran apart) does not
    ort = _calls([("q/MatMul", "MatMul", 40.0), ("q/Add", "Add", 30.0), ("emb/Add", "Add", 5.0)])
    tvm = _calls([("q/MatMul+Add", "MatMul", 50.0), ("emb/Add", "Add", 1.0)],
                 covers={"q/MatMul+Add": ("q/MatMul", "q/Add"), "emb/Add": ("emb/Add",)})
    c = compare({"onnxruntime": ort, "tvm": tvm})
    kinds = {r.key: r for r in c.types}
    assert kinds["Add"].time_us == {"onnxruntime": 35.0, "tvm": 1.0}
    assert (kinds["Add"].fastest, kinds["Add"].comparable) == (None, False)  # not "tvm, x35"
    assert (kinds["MatMul"].fastest, kinds["MatMul"].comparable) == (None, False)
    from layerperf.renderers.views.compare import compare_view

    view = compare_view(c, fmt="json")
    types = view.sections[1]
    assert all(r["spread"] is None for r in types.rows)
    assert any("no fastest for" in line and "Add" in line for line in map(str, types.notes))


def test_a_node_named_after_its_fused_neighbour_takes_that_neighbour_into_its_row() -> None:
    """ONNX Runtime's NCHWc Conv with the Relu inside it is named after the Relu's output: against the torch
    backend's Conv and Relu of a legacy export, one row (conv+relu against conv + relu, not against the conv
    alone with the Relu on torch only), and neither Conv nor Relu names a fastest per type."""
    ort = _calls([("/act/Relu_output_0_nchwc", "Conv", 8.0), ("/fc/Gemm", "Gemm", 15.0)])
    torch_ = _calls([("/conv/Conv", "Conv", 20.0), ("/act/Relu", "Relu", 3.0), ("/fc/Gemm", "Gemm", 18.0)])
    c = compare({"onnxruntime": ort, "torch": torch_})
    row = next(r for r in c.rows if r.key == "/act/Relu_output_0_nchwc")
    assert row.layers == {"onnxruntime": ("/act/Relu_output_0_nchwc",), "torch": ("/conv/Conv", "/act/Relu")}
    assert row.time_us == {"onnxruntime": 8.0, "torch": 23.0}
    assert len(c.rows) == 2
    kinds = {r.key: r for r in c.types}
    assert not kinds["Conv"].comparable and not kinds["Relu"].comparable and kinds["MatMul"].comparable
    # a Relu the runtime ran itself is not taken: the renamed Conv then holds the conv alone
    ort_apart = _calls([("/act/Relu_output_0_nchwc", "Conv", 8.0), ("/act/Relu", "Relu", 1.0)])
    c = compare({"onnxruntime": ort_apart, "torch": torch_})
    assert {r.key: r.layers.get("torch") for r in c.rows}["/act/Relu"] == ("/act/Relu",)


def test_one_fused_node_against_two_kernels_is_one_row() -> None:
    # ONNX Runtime's NCHWc convolution (conv + batch norm + relu, named after the relu's output) against
    # TVM's convolution and its batch-norm kernel: paired by scope, and joined by what TVM's second covers
    ort = _calls([("layer1.0.relu1_nchwc", "Conv", 50.0)])
    tvm = _calls([("layer1.0.conv1", "Conv", 60.0), ("layer1.0.bn1+relu1", "BatchNormalization", 5.0)],
                 covers={"layer1.0.conv1": ("layer1.0.conv1",),
                         "layer1.0.bn1+relu1": ("layer1.0.bn1", "layer1.0.relu1")})
    (row,) = compare({"onnxruntime": ort, "tvm": tvm}).rows
    assert row.layers["tvm"] == ("layer1.0.conv1", "layer1.0.bn1+relu1") and row.time_us["tvm"] == 65.0


def test_time_per_run_is_the_median_call_times_calls_per_run() -> None:
    assert per_run_us(_calls([("a", "Relu", 3.0)], runs=4)) == [3.0]


def test_the_schedule_record_round_trips_and_reads_in_one_line() -> None:
    s = KernelSchedule("fused_conv2d_add_relu", "metaschedule", (Tile("conv2d_nchw", "ff", (2, 8, 4, 1)),),
                       (("conv2d_nchw", ("ff_0", "yy_0")),), (Placement("pad_temp", "inline"),
                                                              Placement("T_relu", "reverse_compute_at", "xx_2")),
                       16, 64, 64, True, (Loop("ff_0_yy_0_fused", 56, "parallel"), Loop("xx_3", 8, "vectorized")),
                       1.5e-4, ("sch.get_sblock(...)",))
    assert KernelSchedule.from_json(s.to_json()) == s
    assert s.compact() == ("tiles=ff:2x8x4x1;order=ff_0,yy_0;parallel=56;vectorize=8;unroll=64;inline=pad_temp;"
                           "at=T_relu@xx_2")
    assert default_schedule("conv2d").compact() == "default schedule"
    ext = TvmKernel("fused_conv2d_add_relu", ("conv", "relu"), "conv", 4, s)
    assert TvmKernel.from_json(ext.to_json()) == ext and ext.figures() == {}


def test_a_layers_tvm_facts_are_saved_under_their_own_key() -> None:
    from layerperf.data.codec import layer_from_json, layer_to_json

    layer = Layer("conv+relu", "Conv", extension=TvmKernel("fused_conv2d_relu", ("conv", "relu"), "conv", 2,
                                                           default_schedule("fused_conv2d_relu")))
    saved = layer_to_json(layer)
    assert saved["memory"] == {} and saved["tvm"]["nodes"] == ["conv", "relu"]
    assert layer_from_json(saved) == layer


@pytest.mark.parametrize(("backends", "says"), [("onnxruntime", "names 1 runtime: compare needs two or more"),
                                               ("onnxruntime,onnxruntime", "names onnxruntime more than once"),
                                               ("onnxruntime,nope", "unknown backend 'nope'")])
def test_compare_refuses_a_bad_list_of_runtimes(backends: str, says: str, capsys: pytest.CaptureFixture[str]) -> None:
    from layerperf.cli import main

    assert main(["compare", "m.onnx", "--backends", backends]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and says in err, err


@pytest.mark.parametrize(("flags", "says"), [
    (["nope.onnx"], "no such model file: nope.onnx"),
    (["resnet18", "--runs", "0"], "--runs must be at least 1, got 0"),
    (["resnet18", "--batch", "0"], "batch must be at least 1, got 0"),
    (["resnet18", "--inputs", "nofile.npz"], "no such inputs file: nofile.npz"),
])
def test_a_mistake_every_runtime_makes_is_said_once(flags: list[str], says: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # not once per runtime and then "compare needs two runtimes that ran; 0 did"
    pytest.importorskip("torch", reason="the torch extra is not installed")
    from layerperf.cli import main

    assert main(["compare", *flags, "--backends", "onnxruntime,torch"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err and "failed" not in err, err


def _fc_model(tmp_path: Path) -> Path:
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.ones((64, 32), dtype=np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["h"], name="fc"),
                               helper.make_node("Tanh", ["h"], ["y"], name="tanh")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16, 32])], [w])
    path = tmp_path / "fc.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9), path)
    return path


def test_compare_needs_no_tvm(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two runtimes that are not TVM (ONNX Runtime and the toy replay backend), as where TVM is not installed."""
    import orjson

    from layerperf import backends
    from layerperf.cli import main

    path = _fc_model(tmp_path)
    had = "replay" in backends.names()  # the contract test's module registers it for the whole session
    backends.register("replay", "backends.replay:ReplayBackend")
    try:
        assert main(["compare", str(path), "--backends", "onnxruntime,replay", "--runs", "2", "--warmup",
                     "0", "--format", "json"]) == 0
    finally:
        if not had:
            backends.unregister("replay")
    doc = orjson.loads(capsys.readouterr().out)
    rows = {r["key"]: r for r in doc["rows"]}
    assert rows["fc"]["layers"] == {"onnxruntime": ["fc"], "replay": ["fc"]} and not doc["failed"]
    assert doc["totals"]["fastest"] in ("onnxruntime", "replay")


@pytest.fixture
def one_runtime_raises(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[BaseException], None]]:
    """The toy replay backend twice (``replay``, ``replay2``), the second raising what the test gives it, as a
    runtime's own error (TVM's ``InternalError`` is a RuntimeError) escapes a profile."""
    import layerperf
    from layerperf import backends

    added = [name for name in ("replay", "replay2") if name not in backends.names()]
    for name in added:  # (the contract test's module may have registered replay for the whole session)
        backends.register(name, "backends.replay:ReplayBackend")
    real = layerperf.profile

    def arm(error: BaseException) -> None:
        def profile(model: object, backend: str = "onnxruntime", **kwargs: object) -> object:
            if backend == "replay2":
                raise error
            return real(model, backend=backend, **kwargs)

        monkeypatch.setattr(layerperf, "profile", profile)

    yield arm
    for name in added:
        backends.unregister(name)


Arm = Callable[[BaseException], None]
NATIVE = RuntimeError("Traceback (most recent call last):\n  1: tvm::runtime::vm::VirtualMachineImpl::InvokeBytecode\n"
                      "InternalError: Check failed: (35 vs. 1) : Invoking function main expects 35 arguments")
COMPARE = ["--backends", "onnxruntime,replay,replay2", "--runs", "2", "--warmup", "0", "--format", "json"]


def test_a_runtime_that_fails_with_its_own_error_is_one_line_and_the_others_are_compared(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], one_runtime_raises: Arm) -> None:
    """Any error a runtime raises (not only layerperf's own) is that runtime's failure: one stderr line naming
    the error's type and its reason, an entry in ``failed``, and the rest compared."""
    import orjson

    from layerperf.cli import main

    one_runtime_raises(NATIVE)
    assert main(["compare", str(_fc_model(tmp_path)), *COMPARE]) == 0
    captured = capsys.readouterr()
    doc = orjson.loads(captured.out)
    assert doc["backends"] == ["onnxruntime", "replay"]
    reason = doc["failed"]["replay2"]
    assert reason.startswith("RuntimeError: ") and "expects 35 arguments" in reason and "\n" not in reason
    assert captured.err.count("\n") == 1 and "replay2 failed: RuntimeError: " in captured.err
    assert "Traceback" not in captured.err


def test_compare_keeps_an_interrupt_and_debug_shows_a_runtimes_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], one_runtime_raises: Arm) -> None:
    """Ctrl-C during one runtime stops the comparison (it is no runtime's failure); ``--debug`` raises a
    runtime's own error with its traceback instead of telling it in one line."""
    from layerperf.cli import INTERRUPTED, main

    path = _fc_model(tmp_path)
    one_runtime_raises(KeyboardInterrupt())
    assert main(["compare", str(path), *COMPARE]) == INTERRUPTED
    captured = capsys.readouterr()
    assert not captured.out and "failed" not in captured.err
    one_runtime_raises(NATIVE)
    with pytest.raises(RuntimeError, match="expects 35 arguments"):
        main(["--debug", "compare", str(path), *COMPARE])


def test_compare_says_each_runtimes_warnings_as_profile_does(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A busy host (here: any share of the CPU counts as busy) and the profiler's cost are warnings of a profile:
    compare says every one of each runtime's, after its name, below its tables and in compare.json, as
    ``profile`` says them below its summary."""
    import orjson

    import layerperf
    from layerperf import backends
    from layerperf.analysis import overhead
    from layerperf.analysis.summary import summary
    from layerperf.cli import main
    from layerperf.renderers.views.profile import summary_notes

    monkeypatch.setattr(overhead, "BUSY_CPU_SHARE", 2.0)  # the calling thread is never on the CPU twice its wall time
    monkeypatch.setattr(overhead, "OVERHEAD_WARN", 0.0)  # and a profiled run always costs more than a plain one
    profiled: dict[str, list[str]] = {}
    real = layerperf.profile

    def profile(model: object, backend: str = "onnxruntime", **kwargs: object) -> object:
        prof = real(model, backend=backend, **kwargs)
        profiled[backend] = [n.text for n in summary_notes(prof, summary(prof)) if n.kind == "warning"]
        return prof

    monkeypatch.setattr(layerperf, "profile", profile)
    path = _fc_model(tmp_path)
    had = "replay" in backends.names()
    backends.register("replay", "backends.replay:ReplayBackend")
    try:
        assert main(["compare", str(path), "--backends", "onnxruntime,replay", "--runs", "3", "--warmup", "1",
                     "--out", str(tmp_path / "cmp"), "--wide"]) == 0
    finally:
        if not had:
            backends.unregister("replay")
    out = " ".join(capsys.readouterr().out.split())  # a terminal's table notes may wrap
    doc = orjson.loads((tmp_path / "cmp" / "compare.json").read_bytes())
    ort_warnings = profiled["onnxruntime"]
    assert any(w.startswith("busy host: ") for w in ort_warnings)
    assert any(w.startswith("profiler cost: ") for w in ort_warnings)
    assert doc["warnings"] == [f"{label}: {w}" for label, ws in profiled.items() for w in ws]
    for line in doc["warnings"]:
        assert f"warning: {' '.join(line.split())}" in out
