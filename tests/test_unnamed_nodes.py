"""Unnamed nodes: ``layerperf profile`` shows them under the names ONNX Runtime's profiler gives them,
and ``bench --node``, the stepwise counters and the layers' graph data take those very names."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import orjson
import pytest
from onnx import TensorProto, helper, numpy_helper

import layerperf
from layerperf.bench.extract import extract_node
from layerperf.cli import main
from layerperf.errors import InputError

FAST = ["--samples", "3", "--min-time", "0.05ms", "--warmup-max", "0.05", "--no-overhead", "--speed-wait", "0"]


def _model() -> onnx.ModelProto:
    """Conv -> Relu -> Relu -> Add(named) -> Mul by a Constant -> Sigmoid, every node but the Add unnamed."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 8, 3, 3)).astype(np.float32), "W")
    nodes = [helper.make_node("Conv", ["X", "W"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Relu", ["r"], ["r2"]),
             helper.make_node("Add", ["r2", "X"], ["a"], name="named_add"),
             helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(np.full(1, 0.5, np.float32))),
             helper.make_node("Mul", ["a", "k"], ["m"]),
             helper.make_node("Sigmoid", ["m"], ["Y"])]
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 8, 12, 12]) for n in ("X", "Y")]
    graph = helper.make_graph(nodes, "unnamed", io[:1], io[1:], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("unnamed") / "unnamed.onnx"
    onnx.save(_model(), path)
    return path


@pytest.mark.parametrize("level", ["disable", "all"])
def test_profile_names_are_what_bench_takes(model_path: Path, level: str) -> None:
    prof = layerperf.profile(model_path, runs=2, warmup=1, opt_level=level, latency=False)
    names = [la.name for la in prof.layers]
    assert len(set(names)) == len(names) and all(names)
    assert "named_add" in names
    graph_nodes = {n.name for n in _model().graph.node}
    unnamed = [la for la in prof.layers if la.name not in graph_nodes]
    assert unnamed  # the runtime ran nodes that have no name in the model
    for layer in prof.layers:
        # found in the executed graph: the layer knows its tensors by name (not only their shapes)
        assert layer.outputs and all(t.name for t in layer.outputs), layer.name
        one = extract_node(model_path, layer.name, opt_level=level)
        assert one.op_type == layer.op_type and one.node_name == layer.name
        assert [t.shape for t in one.outputs] == [t.shape for t in layer.outputs]


def test_unknown_name_lists_close_ones(model_path: Path) -> None:
    prof = layerperf.profile(model_path, runs=1, warmup=0, opt_level="disable", latency=False)
    sigmoid = next(la.name for la in prof.layers if la.op_type == "Sigmoid")
    with pytest.raises(InputError) as err:
        extract_node(model_path, sigmoid + "9", opt_level="disable")
    assert "did you mean" in str(err.value.hint) and sigmoid in str(err.value.hint)


def test_counters_name_unnamed_nodes_too(model_path: Path) -> None:
    from layerperf.counters.probe import probe_event

    if not probe_event("task-clock").ok:
        pytest.skip(f"task-clock cannot be counted here: {probe_event('task-clock').reason}")
    prof = layerperf.profile(model_path, runs=2, warmup=1, opt_level="all", latency=False, events=["task-clock"],
                             passes=1)
    assert all(la.counters.get("task-clock") for la in prof.layers)


def test_bench_node_inputs_npz(model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    x = np.linspace(-1, 1, 8 * 12 * 12, dtype=np.float32).reshape(1, 8, 12, 12)
    npz = tmp_path / "x.npz"
    np.savez(npz, X=x)
    prof = layerperf.profile(model_path, runs=1, warmup=0, opt_level="disable", latency=False)
    conv = next(la.name for la in prof.layers if la.op_type == "Conv")
    one = extract_node(model_path, conv, inputs=npz)
    np.testing.assert_array_equal(one.feed["X"], x)  # the node was fed the file's array, not random data
    assert main(["bench", str(model_path), "--node", conv, "--inputs", str(npz), *FAST, "--format", "json"]) == 0
    assert orjson.loads(capsys.readouterr().out)["node"] == conv
    assert main(["bench", "Relu", "--input", "X=1x8", "--inputs", str(npz), *FAST]) == 2
    assert "--inputs does not apply" in capsys.readouterr().err
