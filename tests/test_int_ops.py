"""Integer arithmetic is not FLOPs: quantized kernels count ``int_ops``, float work stays in ``flops``."""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import orjson
import pytest
from onnx import TensorProto, helper, numpy_helper

import layerperf
from layerperf.analysis.aggregate import aggregate, rows
from layerperf.cost.onnx import node_cost
from layerperf.cost.onnx.graph import graph_costs
from layerperf.data.profile import Layer, Profile
from layerperf.data.tensor import TensorInfo
from layerperf.readers.detect import read_table

from conftest import run_cli

IR_VERSION = 9  # loadable by every supported ONNX Runtime


def _t(shape: tuple[int, ...], dtype: str, name: str) -> TensorInfo:
    return TensorInfo(name, shape, dtype)


def _scalars(*dtypes: str) -> list[TensorInfo]:
    return [_t((), d, f"s{i}") for i, d in enumerate(dtypes)]


# -- the cost model ----------------------------------------------------------------------------------


def test_qlinear_conv_is_integer_macs_and_float_requantization() -> None:
    x, w, b = _t((1, 8, 10, 10), "uint8", "x"), _t((16, 8, 3, 3), "int8", "w"), _t((16,), "int32", "b")
    y = _t((1, 16, 10, 10), "uint8", "y")
    s = _scalars("float32", "uint8", "float32", "int8", "float32", "uint8")
    c = node_cost("QLinearConv", "", {"pads": [1, 1, 1, 1]}, [x, s[0], s[1], w, s[2], s[3], s[4], s[5], b], [y])
    out = 16 * 10 * 10
    assert c.int_ops == 2 * out * 8 * 9 + out  # multiply-adds and the int32 bias
    assert c.flops == 2 * out  # requantizing each result: scale and zero point
    no_bias = node_cost("QLinearConv", "", {"pads": [1, 1, 1, 1]}, [x, *s[:2], w, *s[2:]], [y])
    assert (no_bias.int_ops, no_bias.flops) == (2 * out * 8 * 9, 2 * out)


def test_integer_matmuls() -> None:
    a, b = _t((4, 32), "uint8", "a"), _t((32, 8), "int8", "b")
    macs = 4 * 32 * 8
    mmi = node_cost("MatMulInteger", "", {}, [a, b], [_t((4, 8), "int32", "y")])
    assert (mmi.flops, mmi.int_ops) == (0, 2 * macs)
    s = _scalars("float32", "uint8", "float32", "int8", "float32", "uint8")
    qmm = node_cost("QLinearMatMul", "", {}, [a, s[0], s[1], b, s[2], s[3], s[4], s[5]], [_t((4, 8), "uint8", "y")])
    assert (qmm.flops, qmm.int_ops) == (2 * 4 * 8, 2 * macs)
    fa, bias = _t((4, 32), "float32", "fa"), _t((8,), "float32", "bias")
    dqm = node_cost("DynamicQuantizeMatMul", "com.microsoft", {}, [fa, b, s[2], s[3], bias],
                    [_t((4, 8), "float32", "y")])
    # quantizing A (min, max, scale, shift per element), the integer product, scale and bias per output
    assert (dqm.flops, dqm.int_ops) == (4 * 4 * 32 + 2 * 4 * 8, 2 * macs)


def test_op_on_integer_tensors_counts_integer_operations() -> None:
    ints = node_cost("Add", "", {}, [_t((2, 3), "int64", "a"), _t((2, 3), "int64", "b")], [_t((2, 3), "int64", "c")])
    floats = node_cost("Add", "", {}, [_t((2, 3), "float32", "a"), _t((3,), "float32", "b")],
                       [_t((2, 3), "float32", "c")])
    assert (ints.flops, ints.int_ops) == (0, 6)
    assert (floats.flops, floats.int_ops) == (6, 0)
    pool = node_cost("MaxPool", "", {"kernel_shape": [2, 2], "strides": [2, 2]}, [_t((1, 4, 8, 8), "uint8", "x")],
                     [_t((1, 4, 4, 4), "uint8", "y")])
    assert (pool.flops, pool.int_ops) == (0, 4 * 4 * 4 * 4)
    dq = node_cost("DequantizeLinear", "", {}, [_t((6,), "uint8", "x"), *_scalars("float32", "uint8")],
                   [_t((6,), "float32", "y")])
    assert (dq.flops, dq.int_ops) == (12, 0)  # the conversion to float is float work


def test_unknown_stays_unknown() -> None:
    c = node_cost("NoSuchOp", "", {}, [_t((2, 3), "int8", "x")], [_t((2, 3), "int8", "y")])
    assert (c.flops, c.int_ops) == (None, None)
    # shapes not static: the count is unknown, the kind of work is not
    dyn = TensorInfo("x", ("n", 3), "uint8")
    mmi = node_cost("MatMulInteger", "", {}, [dyn, _t((3, 4), "int8", "b")], [TensorInfo("y", ("n", 4), "int32")])
    assert (mmi.flops, mmi.int_ops) == (0, None)


# -- a quantized model built here, profiled ------------------------------------------------------------


def _const(name: str, value: Any, dtype: Any) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def _quantized_model() -> onnx.ModelProto:
    """QuantizeLinear -> QLinearConv -> QLinearAdd -> Flatten -> QLinearMatMul -> DequantizeLinear,
    and a MatMulInteger beside it, every node named."""
    rng = np.random.default_rng(0)
    inits = [
        _const("xs", 0.05, np.float32), _const("xz", 128, np.uint8),
        _const("w", rng.integers(-20, 20, (16, 8, 3, 3)), np.int8), _const("ws", 0.02, np.float32),
        _const("wz", 0, np.int8), _const("ys", 0.1, np.float32), _const("yz", 128, np.uint8),
        _const("b", rng.integers(-100, 100, 16), np.int32),
        _const("m", rng.integers(-20, 20, (16 * 6 * 6, 10)), np.int8), _const("ms", 0.01, np.float32),
        _const("mz", 0, np.int8), _const("zs", 0.2, np.float32), _const("zz", 128, np.uint8),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"], name="quant"),
        helper.make_node("QLinearConv", ["xq", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["cq"],
                         name="qconv", pads=[1, 1, 1, 1]),
        helper.make_node("QLinearAdd", ["cq", "ys", "yz", "cq", "ys", "yz", "ys", "yz"], ["aq"], name="qadd",
                         domain="com.microsoft"),
        helper.make_node("Flatten", ["aq"], ["fq"], name="flatten"),
        helper.make_node("QLinearMatMul", ["fq", "ys", "yz", "m", "ms", "mz", "zs", "zz"], ["mq"], name="qmatmul"),
        helper.make_node("DequantizeLinear", ["mq", "zs", "zz"], ["y"], name="dequant"),
        helper.make_node("MatMulInteger", ["fq", "m", "yz", "mz"], ["acc"], name="matmul_integer"),
    ]
    graph = helper.make_graph(
        nodes, "quantized", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10]),
         helper.make_tensor_value_info("acc", TensorProto.INT32, [1, 10])], inits)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=IR_VERSION)


def _dims(layer: Layer) -> list[tuple[int, ...]]:
    return [tuple(int(d) for d in t.shape or ()) for t in layer.inputs]


def _matmul_macs(layer: Layer, a: int, b: int) -> int:
    dims = _dims(layer)
    return math.prod(dims[a]) * dims[b][-1]


@pytest.fixture(scope="module")
def quantized(tmp_path_factory: pytest.TempPathFactory) -> tuple[Profile, Path]:
    out = tmp_path_factory.mktemp("quantized")
    prof = layerperf.profile(_quantized_model(), runs=2, warmup=1, latency=False, opt_level="disable")
    layerperf.save(prof, out)
    return prof, out


def test_profile_counts_integer_and_float_work_apart(quantized: tuple[Profile, Path]) -> None:
    prof, _ = quantized
    by_type = {layer.op_type: layer for layer in prof.layers}
    conv = by_type["QLinearConv"]
    x, _, _, w, *_ = _dims(conv)
    (y,) = (tuple(int(d) for d in t.shape or ()) for t in conv.outputs)
    out = math.prod(y)  # from the shapes ONNX Runtime recorded
    assert (conv.int_ops, conv.flops) == (2 * out * math.prod(w[1:]) + out, 2 * out)
    qmm, mmi = by_type["QLinearMatMul"], by_type["MatMulInteger"]
    assert (qmm.int_ops, qmm.flops) == (2 * _matmul_macs(qmm, 0, 3), 2 * 10)
    assert (mmi.int_ops, mmi.flops) == (2 * _matmul_macs(mmi, 0, 1), 0)
    for op in ("QuantizeLinear", "DequantizeLinear"):
        layer = by_type[op]
        assert layer.int_ops == 0 and layer.flops == 2 * math.prod(_dims(layer)[0])
    assert by_type["Flatten"].flops == by_type["Flatten"].int_ops == 0
    add = by_type["QLinearAdd"]
    assert (add.int_ops, add.flops) == (out, 2 * out)  # the add on integers, then requantized


def test_ort_profile_file_gives_int_ops(tmp_path: Path) -> None:
    """ONNX Runtime's own profile: integer and float work of the ops its recorded shapes tell."""
    opts = ort.SessionOptions()
    opts.enable_profiling = True
    opts.profile_file_prefix = str(tmp_path / "ort")
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(_quantized_model().SerializeToString(), opts, providers=["CPUExecutionProvider"])
    sess.run(None, {"x": np.zeros((1, 8, 6, 6), np.float32)})
    path = Path(sess.end_profiling())
    recorded = {e["args"]["op_name"]: e["args"] for e in orjson.loads(path.read_bytes())
                if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")}
    table = {r["op_type"]: r for r in rows(aggregate(read_table(path), "type", "sum"))}

    def numel(op: str, key: str) -> int:
        return math.prod(next(iter(recorded[op][key][0].values())))

    assert (table["QLinearAdd"]["int_ops"], table["QLinearAdd"]["flops"]) == \
        (numel("QLinearAdd", "output_type_shape"), 2 * numel("QLinearAdd", "output_type_shape"))
    for op in ("QuantizeLinear", "DequantizeLinear"):
        assert (table[op]["int_ops"], table[op]["flops"]) == (0, 2 * numel(op, "input_type_shape"))


def test_int_ops_in_every_output(quantized: tuple[Profile, Path]) -> None:
    prof, out = quantized
    expected = {layer.name: layer.int_ops for layer in prof.layers}
    with (out / "layers.csv").open(newline="") as f:
        csv_rows = list(csv.DictReader(f))
    assert {r["name"]: int(r["int_ops"]) for r in csv_rows} == expected
    assert all(r["int_ops_per_s"] for r in csv_rows if r["int_ops"] != "0")
    doc = orjson.loads((out / "trace.json").read_bytes())
    spans = [e for e in doc["traceEvents"] if e.get("cat") == "layer"]
    assert {e["name"]: e["args"]["int_ops"] for e in spans} == expected
    again = layerperf.load(out)
    assert [layer.int_ops for layer in again.layers] == list(expected.values())
    # analyze: summed over the calls of each node
    table = {r["name"]: r for r in rows(aggregate(read_table(out), "name", "sum"))}
    assert {k: r["int_ops"] for k, r in table.items()} == {k: 2 * v for k, v in expected.items() if v is not None}


def test_cli_shows_int_ops(quantized: tuple[Profile, Path]) -> None:
    prof, out = quantized
    total = sum(layer.int_ops or 0 for layer in prof.layers)
    done = run_cli("analyze", str(out), "--format", "json")
    assert done.returncode == 0, done.stderr
    assert sum(r["int_ops"] for r in orjson.loads(done.stdout)) == 2 * total
    table = run_cli("analyze", str(out), "--top", "3")
    assert table.returncode == 0 and "int ops" in table.stdout and "OP/s" in table.stdout


# -- a model quantized by onnxruntime.quantization ------------------------------------------------------


def _mlp() -> onnx.ModelProto:
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
             for n, s in (("w1", (32, 64)), ("b1", (64,)), ("w2", (64, 8)), ("b2", (8,)))]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
             helper.make_node("Add", ["h", "b1"], ["hb"], name="fc1_bias"),
             helper.make_node("Relu", ["hb"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "w2"], ["o"], name="fc2"),
             helper.make_node("Add", ["o", "b2"], ["y"], name="fc2_bias")]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16, 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16, 8])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)


def _scale_products(layers: Sequence[Layer]) -> int:
    """FLOPs of the nodes that only combine scalars (the scales of the two operands): ONNX Runtime's
    fused kernel takes both scales and does this once per run, inside its own arithmetic."""
    return sum(la.flops or 0 for la in layers if la.outputs and all(t.shape == () for t in la.outputs)
               and all(t.shape == () for t in la.inputs))


def test_quantize_dynamic_model(tmp_path: Path) -> None:
    try:
        from onnxruntime import quantization
    except ImportError as exc:  # older releases need ml_dtypes, which layerperf does not depend on
        pytest.skip(f"onnxruntime.quantization does not import here: {exc}")
    float_path, int8_path = tmp_path / "mlp.onnx", tmp_path / "mlp_int8.onnx"
    onnx.save(_mlp(), float_path)
    quantization.quantize_dynamic(str(float_path), str(int8_path), weight_type=quantization.QuantType.QInt8)
    matmul_flops = sum(c.flops or 0 for n, c in graph_costs(_mlp()) if n.op_type == "MatMul")
    totals = {}
    for level in ("disable", "all"):
        prof = layerperf.profile(str(int8_path), runs=1, warmup=0, latency=False, opt_level=level)
        assert all(la.flops is not None and la.int_ops is not None for la in prof.layers)
        # the float model's matrix products, done on integers
        assert sum(la.int_ops or 0 for la in prof.layers) == matmul_flops
        flops = sum(la.flops or 0 for la in prof.layers)
        assert flops > 0  # quantizing the activations, scaling the products, biases, Relu
        totals[level] = flops - _scale_products(prof.layers)
    assert totals["disable"] == totals["all"]
