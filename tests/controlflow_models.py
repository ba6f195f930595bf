"""Small Loop, If and Scan models, built with onnx.helper, whose bodies do MatMul and Add (known FLOPs)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROWS, DIM = 4, 8
LOOP_TRIPS = 3
OUTER_TRIPS, INNER_TRIPS = 2, 3
SCAN_STEPS = 5


def _tensor(name: str, shape: list[int] | None, elem: int = TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def _weights(prefix: str, seed: int) -> list[onnx.TensorProto]:
    rng = np.random.default_rng(seed)
    return [numpy_helper.from_array(rng.standard_normal((DIM, DIM)).astype(np.float32), f"{prefix}W"),
            numpy_helper.from_array(rng.standard_normal(DIM).astype(np.float32), f"{prefix}B")]


def _affine(prefix: str, x: str, y: str) -> list[onnx.NodeProto]:
    """y = x @ W + B, as two nodes: MatMul then Add."""
    return [helper.make_node("MatMul", [x, f"{prefix}W"], [f"{prefix}mm"], name=f"{prefix}matmul"),
            helper.make_node("Add", [f"{prefix}mm", f"{prefix}B"], [y], name=f"{prefix}add")]


def _model(graph: onnx.GraphProto) -> onnx.ModelProto:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    onnx.checker.check_model(model, full_check=True)
    return model


def _loop_body(name: str, inner: list[onnx.NodeProto], inits: list[onnx.TensorProto]) -> onnx.GraphProto:
    """A Loop body carrying x (ROWS x DIM): ``inner`` maps x_in to x_out; the condition passes through."""
    nodes = [*inner, helper.make_node("Identity", ["cond_in"], ["cond_out"], name=f"{name}_cond")]
    return helper.make_graph(
        nodes, name,
        [_tensor("iter", [], TensorProto.INT64), _tensor("cond_in", [], TensorProto.BOOL),
         _tensor("x_in", [ROWS, DIM])],
        [_tensor("cond_out", [], TensorProto.BOOL), _tensor("x_out", [ROWS, DIM])], inits)


def _trips(name: str, n: int) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(n, dtype=np.int64), name)


def loop_model() -> onnx.ModelProto:
    """Loop of LOOP_TRIPS iterations of x = x @ W + B."""
    body = _loop_body("body", _affine("b_", "x_in", "x_out"), _weights("b_", 1))
    loop = helper.make_node("Loop", ["trips", "", "X"], ["Y"], name="loop", body=body)
    graph = helper.make_graph([loop], "loop", [_tensor("X", [ROWS, DIM])], [_tensor("Y", [ROWS, DIM])],
                              [_trips("trips", LOOP_TRIPS)])
    return _model(graph)


def nested_loop_model() -> onnx.ModelProto:
    """A Loop of OUTER_TRIPS iterations whose body is a Loop of INNER_TRIPS iterations of x @ W + B."""
    inner_body = _loop_body("inner_body", _affine("i_", "x_in", "x_out"), _weights("i_", 2))
    inner = helper.make_node("Loop", ["inner_trips", "", "x_in"], ["x_out"], name="inner", body=inner_body)
    outer_body = _loop_body("outer_body", [inner], [])
    outer = helper.make_node("Loop", ["outer_trips", "", "X"], ["Y"], name="outer", body=outer_body)
    relu = helper.make_node("Relu", ["Y"], ["Z"], name="relu")
    graph = helper.make_graph([outer, relu], "nested", [_tensor("X", [ROWS, DIM])], [_tensor("Z", [ROWS, DIM])],
                              [_trips("outer_trips", OUTER_TRIPS), _trips("inner_trips", INNER_TRIPS)])
    return _model(graph)


def if_model() -> onnx.ModelProto:
    """If ``cond``: X @ W + B, else X * 2, then a Relu after it."""
    then = helper.make_graph(_affine("t_", "X", "yt"), "then", [], [_tensor("yt", [ROWS, DIM])], _weights("t_", 3))
    two = numpy_helper.from_array(np.array(2.0, dtype=np.float32), "two")
    other = helper.make_graph([helper.make_node("Mul", ["X", "two"], ["ye"], name="e_mul")], "else", [],
                              [_tensor("ye", [ROWS, DIM])], [two])
    branch = helper.make_node("If", ["cond"], ["Y"], name="if", then_branch=then, else_branch=other)
    relu = helper.make_node("Relu", ["Y"], ["Z"], name="relu")
    graph = helper.make_graph([branch, relu], "if", [_tensor("cond", [], TensorProto.BOOL), _tensor("X", [ROWS, DIM])],
                              [_tensor("Z", [ROWS, DIM])])
    return _model(graph)


def scan_model() -> onnx.ModelProto:
    """Scan over SCAN_STEPS rows: y_t = x_t @ W + B, state += y_t."""
    nodes = [*_affine("s_", "x_t", "y_t"), helper.make_node("Add", ["state_in", "y_t"], ["state_out"], name="s_acc")]
    body = helper.make_graph(nodes, "scan_body", [_tensor("state_in", [DIM]), _tensor("x_t", [DIM])],
                             [_tensor("state_out", [DIM]), _tensor("y_t", [DIM])], _weights("s_", 4))
    scan = helper.make_node("Scan", ["S0", "X"], ["S", "Y"], name="scan", body=body, num_scan_inputs=1)
    graph = helper.make_graph([scan], "scan", [_tensor("S0", [DIM]), _tensor("X", [SCAN_STEPS, DIM])],
                              [_tensor("S", [DIM]), _tensor("Y", [SCAN_STEPS, DIM])])
    return _model(graph)


def feeds(name: str) -> list[dict[str, np.ndarray]]:
    """Inputs for the model ``name``; for the If, one feed per branch."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((ROWS, DIM)).astype(np.float32)
    if name == "if":
        return [{"cond": np.array(c), "X": x} for c in (True, False)]
    if name == "scan":
        return [{"S0": np.zeros(DIM, np.float32), "X": rng.standard_normal((SCAN_STEPS, DIM)).astype(np.float32)}]
    return [{"X": x}]


MODELS = {"loop": loop_model, "nested": nested_loop_model, "if": if_model, "scan": scan_model}
