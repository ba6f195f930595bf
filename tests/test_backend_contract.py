"""The backend contract: what every registered backend gives for a model it can run.

Parametrized over the registry, so a backend that joins it (PyTorch, TVM...) is held to the same
contract; a backend that declares the single-operator capability (``single_op()``) is held to its
contract too, and one that does not is refused by ``bench`` in one line. The toy "replay" backend of
tests/backends (numpy, node by node) is registered here with one line: it is the proof that a backend
needs nothing beyond the interface.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import orjson
import pytest
from onnx import TensorProto, helper, numpy_helper

import layerperf
from layerperf import backends
from layerperf.backends.base import SingleOp
from layerperf.bench.build import build_op
from layerperf.bench.runtime import runtime_options
from layerperf.cli import main
from layerperf.cost import covers
from layerperf.data.memory_report import MemoryReport
from layerperf.data.metadata import Metadata
from layerperf.errors import InputError
from layerperf.models.inputs import make_feed, onnx_input_specs
from layerperf.models.source import open_model

backends.register("replay", "backends.replay:ReplayBackend")

M, K, N = 256, 512, 256  # the MatMuls: big enough that every layer's work stands above a boundary's cost
# GridSample (2 images of 8x64x64 sampled at 64x64 points) is an op the cost model does not know, and one
# every registered runtime runs (TVM's Relax frontend has no Det, which this model used before)
IMAGE = (2, 8, 64, 64)
POINTS = (2, 64, 64)
BACKENDS = backends.names()


def contract_model() -> onnx.ModelProto:
    """x -> MatMul -> Add -> Relu -> MatMul -> Tanh -> Softmax -> y, and m -> GridSample -> d beside it."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array((rng.standard_normal((K, N)) / np.sqrt(K)).astype(np.float32), "w1"),
             numpy_helper.from_array(rng.standard_normal(N).astype(np.float32), "b1"),
             numpy_helper.from_array((rng.standard_normal((N, N)) / np.sqrt(N)).astype(np.float32), "w2"),
             numpy_helper.from_array(rng.uniform(-1.1, 1.1, (*POINTS, 2)).astype(np.float32), "grid")]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["a"], name="mm1"),
             helper.make_node("Add", ["a", "b1"], ["ab"], name="bias"),
             helper.make_node("Relu", ["ab"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "w2"], ["h"], name="mm2"),
             helper.make_node("Tanh", ["h"], ["t"], name="tanh"),
             helper.make_node("Softmax", ["t"], ["y"], name="softmax", axis=-1),
             helper.make_node("GridSample", ["m", "grid"], ["d"], name="sample")]
    graph = helper.make_graph(
        nodes, "contract",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [M, K]),
         helper.make_tensor_value_info("m", TensorProto.FLOAT, list(IMAGE))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [M, N]),
         helper.make_tensor_value_info("d", TensorProto.FLOAT, [IMAGE[0], IMAGE[1], *POINTS[1:]])], inits)
    # ir_version 9 and opset 17: what ONNX Runtime 1.31 loads
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("contract") / "contract.onnx"
    onnx.save(contract_model(), path)
    return path


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    name = str(request.param)
    avail = backends.get(name).availability()
    if not avail.usable:
        pytest.skip(f"backend {name} is not usable here: {avail.reason}")
    return name


@pytest.fixture(scope="module")
def profiled(backend: str, model_path: Path) -> layerperf.Profile:
    """One profile with everything asked: timings, a software counter, the memory profile."""
    return layerperf.profile(model_path, backend=backend, warmup=1, runs=3, events=["task-clock"], passes=2,
                             memory=True)


@pytest.fixture(scope="module")
def saved(profiled: layerperf.Profile, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("saved")
    layerperf.save(profiled, out)
    return out


def _producers(prof: layerperf.Profile) -> dict[str, int]:
    return {t.name: i for i, layer in enumerate(prof.layers) for t in layer.outputs}


def test_layers_in_execution_order(profiled: layerperf.Profile, backend: str) -> None:
    assert profiled.metadata.backend == backend
    names = [layer.name for layer in profiled.layers]
    assert len(names) == len(set(names)) and names
    produced = _producers(profiled)
    graph_inputs = {"x", "m"}
    for i, layer in enumerate(profiled.layers):
        for t in layer.inputs:  # what a layer reads is a graph input, a weight, or an earlier layer's output
            assert t.name in graph_inputs or t.name not in produced or produced[t.name] < i, (layer.name, t.name)
    assert {"y", "d"} <= set(produced)  # the graph's outputs come from its layers


def test_every_run_calls_every_layer_with_a_time(profiled: layerperf.Profile) -> None:
    assert len(profiled.runs) == 3
    for row in profiled.table():
        assert row["calls"] == len(profiled.runs), row["name"]
    for i in range(len(profiled.layers)):
        assert profiled.durations_ns(i).size == 3 and np.median(profiled.durations_ns(i)) > 0
    for run in profiled.runs:
        starts = [s.start_ns for s in run.spans]
        assert starts == sorted(starts) and all(s.start_ns >= run.start_ns for s in run.spans)


def test_shapes_and_dtypes_are_what_ran(profiled: layerperf.Profile) -> None:
    declared = {o.name: o for o in contract_model().graph.output}
    for layer in profiled.layers:
        for t in (*layer.inputs, *layer.outputs):
            assert t.is_static and t.dtype, (layer.name, t)
        for t in layer.inputs:
            if t.name == "x":
                assert t.shape == (M, K) and t.dtype == "float32"
        for t in layer.outputs:
            if t.name in declared:
                dims = tuple(d.dim_value for d in declared[t.name].type.tensor_type.shape.dim)
                assert t.shape == dims and t.dtype == "float32"


def test_flops_known_or_flagged_unknown(profiled: layerperf.Profile) -> None:
    for layer in profiled.layers:
        if covers(layer.domain, layer.op_type):
            assert layer.flops is not None and layer.flops >= 0, layer.name
        else:
            assert layer.flops is None, layer.name  # unknown, never a silent 0
    sample = [layer for layer in profiled.layers if layer.op_type == "GridSample"]
    assert sample and sample[0].flops is None
    from layerperf.analysis.summary import summary

    summ = summary(profiled)
    assert summ["flops_unknown_layers"] >= 1
    assert summ["flops"] >= 2 * (M * K * N + M * N * N)  # at least the two MatMuls' work, whatever fused them
    assert any("GridSample" in w for w in profiled.warnings)


def test_save_load_round_trip(profiled: layerperf.Profile, saved: Path) -> None:
    again = layerperf.load(saved / "trace.json")
    assert again == profiled
    assert [layer.counters for layer in again.layers] == [layer.counters for layer in profiled.layers]
    assert again.memory is not None and again.memory.peak_bytes == profiled.memory.peak_bytes  # type: ignore[union-attr]


# trace.json's metadata keeps the keys layerperf 0.1 wrote; its options object those of each backend (ONNX
# Runtime's execution mode and inter-op threads added since: keys are only ever added)
METADATA_KEYS = {"layerperf_version", "created", "pid", "model", "backend", "backend_version", "provider", "options",
                 "machine"}
OPTION_KEYS = {
    "onnxruntime": {"warmup", "runs", "threads", "opt_level", "provider", "shapes", "inputs_file", "seed", "latency",
                    "max_events", "execution_mode", "inter_op_threads"},
    "torch": {"warmup", "runs", "threads", "seed", "shapes", "level"},
    "replay": {"warmup", "runs", "threads", "seed", "shapes", "replay_dtype"},
    "tvm": {"warmup", "runs", "threads", "seed", "shapes", "target", "pipeline", "tune", "compare", "level",
            "tune_strategy", "target_given", "tuning_state", "tuning_tasks", "tuning_trials_per_task",
            "tuning_trials_run", "tuning_records", "tuning_s", "compile_s", "build_cached", "tvm_ffi"},
}


def test_metadata_is_typed_and_saved_with_its_keys(profiled: layerperf.Profile, saved: Path, backend: str) -> None:
    meta = profiled.metadata
    assert isinstance(meta, Metadata) and meta.backend == backend and meta.options.backend == backend
    assert meta.backend_version == backends.get(backend).availability().version
    assert (meta.plan.warmup, meta.plan.runs, meta.plan.threads) == (1, 3, 0)
    assert meta.machine is not None and meta.machine.cores and meta.layerperf_version == layerperf.__version__
    assert meta.pid == os.getpid() and meta.model.name == "contract" and meta.created
    written = orjson.loads((saved / "trace.json").read_bytes())["otherData"]["layerperf"]["metadata"]
    assert set(written) == METADATA_KEYS and written == meta.to_json()
    if backend in OPTION_KEYS:
        assert set(written["options"]) == OPTION_KEYS[backend]
    assert layerperf.load(saved).metadata == meta


def test_records_are_the_tables_figures(profiled: layerperf.Profile) -> None:
    records, rows = profiled.records(), profiled.table()
    assert len(records) == len(rows) == len(profiled.layers)
    for rec, row in zip(records, rows, strict=True):
        for key in ("name", "op_type", "calls", "median_us", "p90_us", "flops", "in_shapes", "out_dtypes"):
            assert getattr(rec, key) == row[key], (rec.name, key)
        assert rec.backend == profiled.metadata.backend and rec.runs == 3
        assert rec.counters.startswith("task-clock=")


def test_analyze_and_diff_read_it(profiled: layerperf.Profile, saved: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(saved / "trace.json"), "--format", "json"]) == 0
    rows = orjson.loads(capsys.readouterr().out)
    assert {r["name"] for r in rows} == {layer.name for layer in profiled.layers}
    assert all(r["calls"] == len(profiled.runs) for r in rows)
    assert main(["diff", str(saved / "trace.json"), str(saved / "trace.json"), "--format", "json"]) == 0
    diffed = orjson.loads(capsys.readouterr().out)["rows"]
    assert {r["key"] for r in diffed} == {layer.name for layer in profiled.layers}
    assert all(r["match"] == "exact" and not r["only_in"] and r["delta_us"] == 0 for r in diffed)


def test_counters_per_layer(profiled: layerperf.Profile) -> None:
    assert profiled.counters is not None and profiled.counters.events == {"task-clock": "task-clock"}
    assert profiled.counters.passes == 2
    for layer in profiled.layers:
        counts = layer.counters["task-clock"]
        assert len(counts) == 2 and all(math.isfinite(c) and c >= 0 for c in counts), layer.name
    # CPU ns of real work, above an empty boundary's: the slowest layer's surely (a layer of a few µs may
    # count no more than the empty boundary it is measured against when another process shares the host)
    assert len(profiled.counters.stepwise_median_ns) == len(profiled.layers)
    slowest = int(np.nanargmax(profiled.counters.stepwise_median_ns))
    assert np.median(profiled.layers[slowest].counters["task-clock"]) > 0, profiled.layers[slowest].name
    assert sum(np.median(layer.counters["task-clock"]) for layer in profiled.layers) > 0


def test_memory_report(profiled: layerperf.Profile) -> None:
    rep = profiled.memory
    assert isinstance(rep, MemoryReport)
    biggest = max(sum(t.nbytes or 0 for t in layer.outputs) for layer in profiled.layers)
    assert rep.peak_bytes >= biggest > 0  # a tensor is live while its layer writes it
    assert rep.peak_node in {layer.name for layer in profiled.layers}
    assert rep.runtime is not None and rep.runtime.rss_samples
    assert rep.runtime.rss_hwm_bytes is not None and rep.runtime.rss_baseline_bytes is not None
    assert rep.runtime.rss_hwm_bytes >= rep.runtime.rss_baseline_bytes
    assert {s.node for s in rep.runtime.rss_samples} <= set(range(len(profiled.layers)))


def test_profile_command(backend: str, model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["profile", str(model_path), "--backend", backend, "--warmup", "0", "--runs", "2", "--no-latency",
                 "--format", "json", "--out", str(out)]) == 0
    doc = orjson.loads(capsys.readouterr().out)
    assert doc["summary"]["runs"] == 2 and doc["layers"]
    assert json.loads((out / "trace.json").read_text())["traceEvents"]
    assert (out / "layers.csv").read_text().count("\n") == len(doc["layers"]) + 1


def test_bad_model_is_one_line(backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07not a model at all")
    out = tmp_path / "out"
    assert main(["profile", str(bad), "--backend", backend, "--runs", "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and str(bad) in err
    assert not out.exists()


def test_backends_command_lists_it(backend: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["backends", "--format", "json"]) == 0
    found = {b["name"]: b for b in orjson.loads(capsys.readouterr().out)["backends"]}
    assert found[backend]["usable"] is True and found[backend]["version"]


# -- the toy backend's own -------------------------------------------------------------------------

@pytest.fixture
def replay_only() -> Iterator[None]:
    if "replay" not in backends.names():
        pytest.skip("the replay backend is not registered")
    yield


def test_replay_computes_what_onnxruntime_does(replay_only: None) -> None:
    import onnxruntime as ort

    from backends.replay import Replayer

    model = contract_model()
    rng = np.random.default_rng(1)
    feed = {"x": rng.standard_normal((M, K)).astype(np.float32),
            "m": rng.standard_normal(IMAGE).astype(np.float32)}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)
    got = Replayer(model, "float32").run(feed)
    np.testing.assert_allclose(got["y"], want[0], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got["d"], want[1], rtol=1e-3, atol=1e-4)


def test_replay_conv_matches_onnxruntime(replay_only: None) -> None:
    import onnxruntime as ort

    from backends.replay import Replayer

    rng = np.random.default_rng(2)
    w = numpy_helper.from_array(rng.standard_normal((6, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(6).astype(np.float32), "b")
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv", pads=[1, 2, 1, 0], strides=[2, 1],
                            dilations=[1, 2])
    graph = helper.make_graph([node], "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 9, 10])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    feed = {"x": rng.standard_normal((2, 3, 9, 10)).astype(np.float32)}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)[0]
    np.testing.assert_allclose(Replayer(model, "float32").run(feed)["y"], want, rtol=1e-4, atol=1e-5)


def test_replay_refuses_an_op_it_cannot_run(replay_only: None, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["r"], name="ok"),
                               helper.make_node("Erf", ["r"], ["y"], name="erf")], "g", [x],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    path = tmp_path / "erf.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9), path)
    out = tmp_path / "out"
    assert main(["profile", str(path), "--backend", "replay", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no kernel for op type 'Erf' (node 'erf')" in err
    assert not out.exists()


def test_replay_flag_reaches_it(replay_only: None, model_path: Path, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["profile", str(model_path), "--backend", "replay", "--replay-dtype", "float64", "--runs", "1",
                 "--warmup", "0", "--no-latency", "--out", str(out)]) == 0
    prof = layerperf.load(out)
    assert prof.metadata.options.get("replay_dtype") == "float64"
    tanh = next(layer for layer in prof.layers if layer.op_type == "Tanh")
    assert [t.dtype for t in tanh.outputs] == ["float64"] and tanh.bytes_written == M * N * 8


# -- the single-operator capability, where a backend declares it ----------------------------------

FAST_BENCH = {"samples": 3, "min_time_ms": 0.05, "warmup_max_s": 0.05, "overhead": False, "speed_wait_s": 0}


@pytest.fixture(scope="module")
def single_op(backend: str) -> SingleOp:
    runner = backends.get(backend).single_op()
    if runner is None:
        with pytest.raises(InputError, match=f"backend '{backend}' cannot measure one operator in isolation"):
            backends.single_op(backend)
        pytest.skip(f"backend {backend} declares no single-operator capability (refused in one line)")
    return runner


def test_single_op_prepares_a_call_that_runs_the_op(single_op: SingleOp, backend: str) -> None:
    one = build_op("MatMul", {"A": "64x32", "B": "32x16"})
    prepared = single_op.prepare(one.model, one.feed, threads=1, options=runtime_options(backend, "basic",
                                                                                        "CPUExecutionProvider"))
    assert [(t.shape, t.dtype) for t in prepared.outputs] == [((64, 16), "float32")]
    assert prepared.kernels and all(k.op_type and k.provider for k in prepared.kernels)
    for _ in range(3):
        prepared.call()  # the same bound inputs, again and again


def test_single_op_refuses_what_it_cannot_build_in_one_line(single_op: SingleOp, backend: str) -> None:
    one = build_op("MatMul", {"A": "4x3", "B": "3x2"})
    broken = onnx.ModelProto()
    broken.CopyFrom(one.model)
    broken.graph.node[0].op_type = "NoSuchOp"
    with pytest.raises(InputError) as info:
        single_op.prepare(broken, one.feed, threads=1, options=runtime_options(backend, "basic",
                                                                               "CPUExecutionProvider"))
    assert "\n" not in str(info.value)


def test_single_op_gives_the_graph_and_the_values_of_a_run(single_op: SingleOp, backend: str,
                                                          model_path: Path) -> None:
    source = open_model(model_path)
    feed = make_feed(source.proto, onnx_input_specs(source.proto))
    options = runtime_options(backend, "disable", "CPUExecutionProvider")
    graph = single_op.node_graph(source, feed, options)
    assert {"mm1", "bias", "relu", "sample"} <= set(graph.nodes) and graph.nodes["mm1"].op_type == "MatMul"
    values = single_op.values(graph.model, ["a", "r"], feed, options=options, data_dir=source.data_dir,
                              what=source.name)
    np.testing.assert_allclose(values["r"], np.maximum(values["a"] + numpy_helper.to_array(
        next(i for i in source.proto.graph.initializer if i.name == "b1")), 0), rtol=1e-5, atol=1e-5)


def test_bench_measures_an_op_and_a_node_on_it(single_op: SingleOp, backend: str, model_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    r = layerperf.bench_op("Relu", {"X": "1x64x8x8"}, backend=backend, **FAST_BENCH)
    assert r.backend == backend and r.median_us > 0 and r.flops is not None and r.kernels
    assert r.to_json()["backend"] == backend
    n = layerperf.bench_node(model_path, "mm1", backend=backend, **FAST_BENCH)
    assert n.op_type == "MatMul" and n.flops == 2 * M * K * N and n.inputs[0].shape == (M, K)
    assert main(["bench", "Tanh", "--input", "input=16x16", "--backend", backend, "--samples", "3",
                 "--min-time", "50us", "--no-overhead", "--speed-wait", "0", "--format", "json"]) == 0
    doc = orjson.loads(capsys.readouterr().out)
    assert doc["backend"] == backend and doc["op_type"] == "Tanh"
