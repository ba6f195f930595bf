"""bench: parsing the flags, naming and checking inputs by the op schema, and the one-node model."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from layerperf.bench.build import InputArg, build_op
from layerperf.bench.parse import (
    guess_attr,
    parse_const,
    parse_dims,
    parse_dtype,
    parse_duration_ms,
    parse_input,
    parse_sweep,
    parse_threads,
)
from layerperf.errors import InputError

CONV = {"X": "1x3x16x16", "W": "8x3x3x3", "B": "8"}


# -- parsing ---------------------------------------------------------------------------------------
def test_parse_input_dims_and_dtype() -> None:
    assert parse_input("X=1x3x224x224") == ("X", (1, 3, 224, 224), None)
    assert parse_input("X=1x64:float16") == ("X", (1, 64), "float16")
    assert parse_input("idx=7:int64") == ("idx", (7,), "int64")
    assert parse_input("s=scalar:fp32") == ("s", (), "float32")


@pytest.mark.parametrize("text", ["1x3xax8", "1x-3", "1x0x4", "", "1,3"])
def test_bad_dims(text: str) -> None:
    with pytest.raises(InputError, match="dims|malformed"):
        parse_dims(text)


@pytest.mark.parametrize("item", ["X", "X=", "=1x3", "X=1x3:floot"])
def test_malformed_input_items(item: str) -> None:
    with pytest.raises(InputError):
        parse_input(item)


def test_dtype_aliases() -> None:
    assert parse_dtype("float") == "float32"
    assert parse_dtype("FP16") == "float16"
    assert parse_dtype("double") == "float64"
    with pytest.raises(InputError, match="unknown dtype 'complex64'"):
        parse_dtype("complex64")


def test_parse_const_is_json() -> None:
    name, arr, dtype = parse_const("shape=[1,-1]:int64")
    assert (name, dtype, np.asarray(arr).tolist()) == ("shape", "int64", [1, -1])
    name, arr, dtype = parse_const("min=0.5")
    assert np.asarray(arr).shape == () and dtype is None
    with pytest.raises(InputError, match="not a number or a JSON list"):
        parse_const("shape=[1,")


def test_guess_attr_types() -> None:
    assert guess_attr("3") == 3
    assert guess_attr("0.5") == 0.5
    assert guess_attr("1,1,2,2") == [1, 1, 2, 2]
    assert guess_attr("1,0.5") == [1.0, 0.5]
    assert guess_attr("SAME_UPPER") == "SAME_UPPER"


def test_parse_threads_sweep_and_duration() -> None:
    assert parse_threads("1,2") == [1, 2]
    assert parse_threads(4) == [4]
    with pytest.raises(InputError):
        parse_threads("1,two")
    with pytest.raises(InputError):
        parse_threads("-1")
    assert parse_sweep("X=1x8,1x16") == ("X", [(1, 8), (1, 16)])
    assert parse_duration_ms("1") == 1.0
    assert parse_duration_ms("500us") == pytest.approx(0.5)
    assert parse_duration_ms("0.01s") == pytest.approx(10.0)
    with pytest.raises(InputError):
        parse_duration_ms("-1ms")


# -- the model -------------------------------------------------------------------------------------
def test_conv_weights_are_initializers_and_data_is_an_input() -> None:
    one = build_op("Conv", CONV, {"pads": "1,1,1,1", "strides": "2,2"})
    g = one.model.graph
    assert [i.name for i in g.input] == ["X"]
    assert sorted(i.name for i in g.initializer) == ["B", "W"]
    assert list(g.node[0].input) == ["X", "W", "B"]
    assert one.attrs == {"pads": [1, 1, 1, 1], "strides": [2, 2]}
    assert list(one.feed) == ["X"] and one.feed["X"].shape == (1, 3, 16, 16)
    assert one.outputs[0].shape == (1, 8, 8, 8) and one.outputs[0].dtype == "float32"
    onnx.checker.check_model(one.model, full_check=True)


def test_weights_as_inputs() -> None:
    one = build_op("Conv", CONV, weights="inputs")
    assert [i.name for i in one.model.graph.input] == ["X", "W", "B"]
    assert not one.model.graph.initializer and sorted(one.feed) == ["B", "W", "X"]


def test_matmul_b_is_a_weight_gemm_b_and_c() -> None:
    assert build_op("MatMul", {"A": "4x8", "B": "8x16"}).weights == ("B",)
    assert build_op("Gemm", {"A": "4x8", "B": "8x16", "C": "16"}).weights == ("B", "C")


def test_inputs_given_as_tuples_arrays_and_dtypes() -> None:
    one = build_op("Add", {"A": ((2, 3), "float16"), "B": "2x3:float16"})
    assert [t.dtype for t in one.inputs if t is not None] == ["float16", "float16"]
    assert build_op("Add", {"A": (2, 3), "B": [1, 3]}).outputs[0].shape == (2, 3)
    one = build_op("Reshape", {"data": "4x8", "shape": np.array([2, -1])})
    assert one.outputs[0].shape == (2, 16)
    assert "shape" in one.weights  # a constant is an initializer holding exactly its values
    init = {i.name: onnx.numpy_helper.to_array(i) for i in one.model.graph.initializer}
    assert init["shape"].tolist() == [2, -1] and init["shape"].dtype == np.int64


def test_integer_inputs_default_to_int64_zeros() -> None:
    one = build_op("Gather", {"data": "10x4", "indices": "3"})
    assert one.feed["indices"].dtype == np.int64 and not one.feed["indices"].any()
    assert one.outputs[0].shape == (3, 4)


def test_variadic_inputs_in_index_order() -> None:
    one = build_op("Concat", {"inputs_1": "2x5", "inputs_0": "2x3"}, {"axis": 1})
    assert list(one.model.graph.node[0].input) == ["inputs_0", "inputs_1"]
    assert one.outputs[0].shape == (2, 8)


def test_omitted_optional_input_in_the_middle() -> None:
    one = build_op("Clip", {"input": "4", "max": np.array(1.0, np.float32)})
    assert list(one.model.graph.node[0].input) == ["input", "", "max"]
    assert one.inputs[1] is None


def test_contrib_op_imports_its_domain() -> None:
    one = build_op("FusedConv", {"X": "1x3x8x8", "W": "4x3x3x3"}, {"activation": "Relu"},
                   domain="com.microsoft")
    assert {o.domain for o in one.model.opset_import} == {"", "com.microsoft"}
    assert one.model.graph.node[0].domain == "com.microsoft"


def test_outputs_count() -> None:
    one = build_op("Split", {"input": "4x8"}, {"axis": 1, "num_outputs": 2}, n_outputs=2)
    assert [o.shape for o in one.outputs] == [(4, 4), (4, 4)]
    assert len(build_op("MaxPool", {"X": "1x1x4x4"}, {"kernel_shape": [2, 2]}).outputs) == 1


def test_explicit_input_arg() -> None:
    one = build_op("Relu", {"X": InputArg((2, 2), "float64")})
    assert one.feed["X"].dtype == np.float64


# -- errors ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("op_type, inputs, attrs, kwargs, message", [
    ("Convv", {"X": "1x3"}, {}, {}, r"unknown operator 'Convv'.*did you mean Conv"),
    ("FusedConv", {"X": "1x3"}, {}, {}, r"unknown operator.*pass --domain com.microsoft"),
    ("Conv", {"X": "1x3x8x8"}, {}, {}, r"Conv needs input W"),
    ("Conv", {"X": "1x3x8x8", "W": "4x3x3x3", "Z": "4"}, {}, {}, r"Conv has no input 'Z'"),
    ("Relu", {"X": "2", "Y": "2"}, {}, {}, r"Relu has no input 'Y'"),
    ("Conv", {"X": "1x3x8x8:int32", "W": "4x3x3x3"}, {}, {}, r"input X cannot be int32"),
    ("Conv", {"X": "1x3x8x8", "W": "4x3x3x3"}, {"pad": "1"}, {}, r"no attribute 'pad'.*did you mean pads"),
    ("Conv", {"X": "1x3x8x8", "W": "4x3x3x3"}, {"group": "two"}, {}, r"group of Conv: expected an integer"),
    ("Conv", {"X": "1x3x8x8", "W": "4x3x3x3"}, {"pads": "1,1"}, {}, r"rejects .*pads has incorrect size"),
    ("MatMul", {"A": "3x4", "B": "5x6"}, {}, {}, r"MatMul rejects"),
    ("Conv", {"X": "1x3x2x2", "W": "4x3x3x3"}, {}, {}, r"empty output Y of shape 1x4x0x0"),
    ("Reshape", {"data": np.zeros((2, 2), np.float32), "shape": np.array([4])}, {}, {}, r"every input .* constant"),
    ("Relu", {"X": "2"}, {}, {"opset": 999}, r"--opset 999 is out of range"),
    ("Relu", {"X": "2"}, {}, {"weights": "W"}, r"--weights names W"),
    ("Concat", {}, {"axis": 0}, {}, r"Concat takes at least 1 inputs, got 0"),
    ("Relu", {"X": "2"}, {}, {"domain": "com.microsoft"}, r"unknown operator 'Relu'.*leave out --domain"),
])
def test_build_errors(op_type: str, inputs: dict, attrs: dict, kwargs: dict, message: str) -> None:
    with pytest.raises(InputError, match=message):
        build_op(op_type, inputs, attrs, **kwargs)
