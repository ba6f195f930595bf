"""Small models and checks the TVM backend's tests share (no TVM imported here)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper, shape_inference


def two_matmuls() -> onnx.ModelProto:
    """MatMul(64x64) -> Relu -> MatMul(64x32): two tuning tasks, each quick to build and run."""
    rng = np.random.default_rng(0)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32])
    inits = [numpy_helper.from_array(rng.standard_normal((64, 64)).astype(np.float32), "w1"),
             numpy_helper.from_array(rng.standard_normal((64, 32)).astype(np.float32), "w2")]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["m1"], name="mm1"),
             helper.make_node("Relu", ["m1"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "w2"], ["y"], name="mm2")]
    graph = helper.make_graph(nodes, "two_matmuls", [x], [y], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def conv_chain(*ops: str) -> onnx.ModelProto:
    """x (1x3x32x32) -> Conv (16 3x3 filters, bias) -> Relu -> each of ``ops`` -> y, each node named
    after its op and numbered from its second (``conv``, ``relu``, then ``conv2``: 16x16x3x3, no bias;
    ``relu2``, ``sigmoid``): TVM fuses each Conv with what follows, the last group ending at ``y``."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((16, 3, 3, 3)).astype(np.float32), "W"),
             numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "B")]
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c"], name="conv", pads=[1] * 4),
             helper.make_node("Relu", ["c"], ["r"], name="relu")]
    seen = {"Conv": 1, "Relu": 1}
    for op in ops:
        seen[op] = seen.get(op, 0) + 1
        name = op.lower() + (str(seen[op]) if seen[op] > 1 else "")
        if op == "Conv":
            inits.append(numpy_helper.from_array(rng.standard_normal((16, 16, 3, 3)).astype(np.float32), f"{name}.w"))
            nodes.append(helper.make_node("Conv", [nodes[-1].output[0], f"{name}.w"], [name], name=name, pads=[1] * 4))
        else:
            nodes.append(helper.make_node(op, [nodes[-1].output[0]], [name], name=name))
    nodes[-1].output[0] = "y"
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 32, 32])
    graph = helper.make_graph(nodes, "conv_chain", [x], [y], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def det_model() -> onnx.ModelProto:
    """x -> Det -> y: a valid model with an op TVM's Relax frontend has no converter for."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [8])
    graph = helper.make_graph([helper.make_node("Det", ["x"], ["y"], name="the_det")], "det", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def shape_padded() -> onnx.ModelProto:
    """x -> Pad -> Relu, the pads computed from ``Shape(x)`` and constants as exporters write them (TVM's
    frontend refuses such pads: "Node pad cannot handle ShapeExpr inputs")."""
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("Slice", ["s", "two", "three"], ["height"], name="height"),
             helper.make_node("Sub", ["height", "seven"], ["one"], name="one"),
             helper.make_node("ConstantOfShape", ["three"], ["zeros"], name="zeros",
                              value=numpy_helper.from_array(np.array([0], dtype=np.int64))),
             helper.make_node("Concat", ["zeros", "one", "zeros", "one"], ["pads"], name="pads", axis=0),
             helper.make_node("Pad", ["x", "pads"], ["p"], name="pad"),
             helper.make_node("Relu", ["p"], ["y"], name="relu")]
    inits = [numpy_helper.from_array(np.array([v], dtype=np.int64), name)
             for name, v in (("two", 2), ("three", 3), ("seven", 7))]
    graph = helper.make_graph(nodes, "shape_padded", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                   ["N", 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, 8, 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def initializers_as_inputs() -> onnx.ModelProto:
    """x -> MatMul -> Add -> y in IR version 3 as the onnx package's light models are written: every
    initializer listed among the graph's inputs too, the weight built by ConstantOfShape from a
    ``w__SHAPE`` initializer (which folding evaluates), the bias an initializer left as it is."""
    nodes = [helper.make_node("ConstantOfShape", ["w__SHAPE"], ["w"], name="w",
                              value=numpy_helper.from_array(np.array([0.5], dtype=np.float32))),
             helper.make_node("MatMul", ["x", "w"], ["h"], name="fc"),
             helper.make_node("Add", ["h", "b"], ["y"], name="bias")]
    inits = [numpy_helper.from_array(np.array([4, 3], dtype=np.int64), "w__SHAPE"),
             numpy_helper.from_array(np.arange(3, dtype=np.float32), "b")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4]),
              helper.make_tensor_value_info("w__SHAPE", TensorProto.INT64, [2]),
              helper.make_tensor_value_info("b", TensorProto.FLOAT, [3])]
    graph = helper.make_graph(nodes, "initializers_as_inputs", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)], ir_version=3)


def with_op(op_type: str, domain: str = "") -> onnx.ModelProto:
    """A one-node model of ``op_type`` (for refusals: the node need not be valid to be refused)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    node = helper.make_node(op_type, ["x"], ["y"], name=f"the_{op_type.lower()}", domain=domain)
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    return helper.make_model(helper.make_graph([node], "one", [x], [y]), opset_imports=opsets, ir_version=9)


def feed(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    """Random inputs for a model with static input shapes (integers small: token ids)."""
    rng = np.random.default_rng(seed)
    out = {}
    for vi in model.graph.input:
        tt = vi.type.tensor_type
        shape = [d.dim_value for d in tt.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(tt.elem_type)
        out[vi.name] = (rng.standard_normal(shape).astype(dtype) if dtype.kind == "f"
                        else rng.integers(0, 100, shape).astype(dtype))
    return out


def every_value(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every tensor ONNX Runtime computes for ``inputs`` (all node outputs made graph outputs)."""
    import onnxruntime as ort

    inferred = shape_inference.infer_shapes(model)
    exposed = onnx.ModelProto()
    exposed.CopyFrom(inferred)
    known = {o.name for o in exposed.graph.output}
    exposed.graph.output.extend(vi for vi in inferred.graph.value_info if vi.name not in known)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(exposed.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, inputs), strict=True))


def output_checks(model: onnx.ModelProto, cmap: Any) -> dict[int, int]:
    """Call -> node, for each call that writes a node's output: the last call covering the node,
    and the group's last node for a fused kernel (what its output argument then holds)."""
    last: dict[int, int] = {}
    for site in cmap.sites:
        for node in site.nodes:
            last[node] = site.call
    return {s.call: max(s.nodes) for s in cmap.sites if s.nodes and last[max(s.nodes)] == s.call}


def mismatches(model: onnx.ModelProto, cmap: Any, written: dict[int, list[np.ndarray]],
               values: dict[str, np.ndarray]) -> list[str]:
    """The calls whose output differs from ONNX Runtime's value of the node they are mapped to."""
    bad = []
    for call, node in output_checks(model, cmap).items():
        want = values[model.graph.node[node].output[0]]
        got = written[call][0]
        if got.shape != want.shape and got.size == want.size:
            got = got.reshape(want.shape)  # a fused reshape's kernel may write the flat layout
        if got.shape != want.shape or not np.allclose(got, want, rtol=1e-3, atol=1e-3):
            bad.append(f"call {call} {cmap.sites[call].func} vs node {model.graph.node[node].name}")
    return bad


def save(model: onnx.ModelProto, folder: Path, name: str) -> Path:
    path = folder / f"{name}.onnx"
    onnx.save(model, path)
    return path


@pytest.fixture(scope="module", autouse=True)
def own_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Builds and tuning databases in a folder of the test module's (the zoo's models stay where they
    are): imported into a module, it is used by every test there."""
    root = tmp_path_factory.mktemp("cache")
    zoo = Path(os.environ.get("LAYERPERF_CACHE") or Path.home() / ".cache" / "layerperf") / "zoo"
    if zoo.is_dir():
        (root / "zoo").symlink_to(zoo)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LAYERPERF_CACHE", str(root))
        yield root
