"""Every ONNX tensor type as a model input: generated data, --inputs files, and ONNX Runtime's refusals in one line."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import layerperf
from layerperf.backends.ort.counting import _restored, _storable
from layerperf.backends.ort.session import Session, ort_message
from layerperf.backends.ort.stepwise import StepwiseExecutor
from layerperf.data.tensor import onnx_elem_to_dtype
from layerperf.errors import BackendError, InputError
from layerperf.models.inputs import InputSpec, load_npz, make_feed, ort_type_to_numpy, random_inputs

from conftest import run_cli, tiny_cnn

ELEM_TYPES = [v for name, v in TensorProto.DataType.items() if name != "UNDEFINED"]
SHAPE = [2, 3]


def one_op(elem: int, op: str = "Identity", out_elem: int | None = None, shape: list[int] | None = None,
           **attrs: object) -> onnx.ModelProto:
    shape = SHAPE if shape is None else shape
    x = helper.make_tensor_value_info("x", elem, shape)
    y = helper.make_tensor_value_info("y", elem if out_elem is None else out_elem, shape)
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"], name="op", **attrs)], "g", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 25)], ir_version=11)


def to_float(elem: int) -> onnx.ModelProto:
    """Cast to float, which ONNX Runtime has for nearly every type; Identity where ONNX defines no such Cast."""
    cast = one_op(elem, "Cast", TensorProto.FLOAT, to=TensorProto.FLOAT)
    return cast if checks(cast) and elem not in (TensorProto.STRING, TensorProto.BOOL) else one_op(elem)


def checks(model: onnx.ModelProto) -> bool:
    try:
        onnx.checker.check_model(model, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError):
        return False
    return True


def ort_loads(model: onnx.ModelProto) -> bool:
    so = ort.SessionOptions()
    so.log_severity_level = 4
    try:
        ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    except Exception:  # whatever ONNX Runtime raises: it refuses this model
        return False
    return True


@pytest.mark.parametrize("elem", ELEM_TYPES, ids=[TensorProto.DataType.Name(v) for v in ELEM_TYPES])
def test_every_tensor_type_profiles_or_is_refused_in_one_line(elem: int) -> None:
    model = to_float(elem)
    if not checks(model):  # a type no op of this opset takes yet (float6): the checker's one line
        with pytest.raises(InputError, match="fails the ONNX checker"):
            layerperf.profile(model, warmup=0, runs=1, latency=False)
    elif ort_loads(model):
        prof = layerperf.profile(model, warmup=0, runs=1, latency=False)
        assert [layer.op_type for layer in prof.layers] == [model.graph.node[0].op_type]
    else:
        with pytest.raises(BackendError, match="ONNX Runtime cannot load") as info:
            layerperf.profile(model, warmup=0, runs=1, latency=False)
        assert "\n" not in str(info.value)


@pytest.mark.parametrize("elem", ELEM_TYPES, ids=[TensorProto.DataType.Name(v) for v in ELEM_TYPES])
def test_random_data_has_the_type_and_shape_asked(elem: int) -> None:
    dtype = onnx_elem_to_dtype(elem)
    for shape in [(2, 3), ()]:
        arr = random_inputs([InputSpec("x", shape, dtype)], {"x": shape}, {})["x"]
        assert isinstance(arr, np.ndarray)
        assert arr.shape == shape
        assert (arr.dtype.kind in "U" if dtype == "string" else str(arr.dtype) == dtype)


def test_ort_type_names_map_to_the_dtypes_of_onnx_types() -> None:
    for elem in ELEM_TYPES:
        ort_name = f"tensor({TensorProto.DataType.Name(elem).lower()})"
        assert ort_type_to_numpy(ort_name) == onnx_elem_to_dtype(elem)
    assert ort_type_to_numpy("tensor(float)") == "float32"
    assert ort_type_to_numpy("optional(tensor(int64))") == "int64"
    assert ort_type_to_numpy("seq(tensor(float))") == "seq(tensor(float))"


ONNX_NAMES = {"bfloat16": "BFLOAT16", "float8_e4m3fn": "FLOAT8E4M3FN", "float8_e5m2fnuz": "FLOAT8E5M2FNUZ",
              "int4": "INT4", "uint4": "UINT4", "int2": "INT2", "uint2": "UINT2"}


@pytest.mark.parametrize("dtype", list(ONNX_NAMES))
def test_types_numpy_lacks_cross_to_ort_bit_exact(dtype: str) -> None:
    values = np.array([[-8, -3, -1, 0, 1, 7, 3]], np.float32)
    if dtype.startswith("uint"):
        values = np.abs(values) % (16 if dtype == "uint4" else 4)
    elif dtype == "int2":
        values = np.clip(values, -2, 1)
    arr = values.astype(dtype)
    elem = getattr(TensorProto, ONNX_NAMES[dtype], None)
    cast = one_op(elem, "Cast", TensorProto.FLOAT, shape=list(arr.shape), to=TensorProto.FLOAT) if elem else None
    if cast is None or not ort_loads(cast):
        pytest.skip(f"this onnx or ONNX Runtime {ort.__version__} has no Cast from {dtype}")
    sess = Session(cast.SerializeToString(), ort.SessionOptions(), "CPUExecutionProvider", what="cast")
    np.testing.assert_array_equal(sess.run(None, {"x": arr})[0], arr.astype(np.float32))
    back = Session(one_op(TensorProto.FLOAT, "Cast", elem, shape=list(arr.shape), to=elem).SerializeToString(),
                   ort.SessionOptions(), "CPUExecutionProvider", what="cast back")
    out = back.run(None, {"x": arr.astype(np.float32)})[0]
    assert out.dtype == arr.dtype
    np.testing.assert_array_equal(out.astype(np.float32), arr.astype(np.float32))


def test_bool_scalar_input_of_an_if_model_profiles() -> None:
    def branch(name: str, value: float) -> onnx.GraphProto:
        out = helper.make_tensor_value_info(f"{name}_y", TensorProto.FLOAT, [1])
        const = helper.make_node("Constant", [], [f"{name}_y"], value=helper.make_tensor("v", TensorProto.FLOAT,
                                                                                         [1], [value]))
        return helper.make_graph([const], name, [], [out])

    cond = helper.make_tensor_value_info("cond", TensorProto.BOOL, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    node = helper.make_node("If", ["cond"], ["y"], name="if", then_branch=branch("then", 1.0),
                            else_branch=branch("else", 0.0))
    model = helper.make_model(helper.make_graph([node], "g", [cond], [y]),
                              opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    prof = layerperf.profile(model, warmup=0, runs=2, latency=False)
    assert "if" in [layer.name for layer in prof.layers]


def spec(dtype: str) -> list[InputSpec]:
    return [InputSpec("x", (2, 3), dtype)]


def npz(tmp_path: Path, **arrays: np.ndarray) -> Path:
    path = tmp_path / "in.npz"
    np.savez(path, **arrays)  # type: ignore[arg-type]
    return path


def test_npz_carries_types_numpy_lacks_as_bits_and_values(tmp_path: Path) -> None:
    bf16 = np.arange(6, dtype=np.float32).reshape(2, 3).astype(ml_dtypes.bfloat16)
    got = load_npz(npz(tmp_path, x=bf16.view(np.uint16)), spec("bfloat16"))["x"]
    assert got.dtype == bf16.dtype
    np.testing.assert_array_equal(got, bf16)
    got = load_npz(npz(tmp_path, x=np.array([[-8, 0, 7], [1, 2, 3]], np.int8)), spec("int4"))["x"]
    assert str(got.dtype) == "int4"
    np.testing.assert_array_equal(got.astype(np.int8), [[-8, 0, 7], [1, 2, 3]])
    got = load_npz(npz(tmp_path, x=np.array([["a", "bc", ""], ["d", "e", "f"]])), spec("string"))["x"]
    assert got.dtype.kind == "U"


@pytest.mark.parametrize(("dtype", "array", "words"), [
    ("int4", np.full((2, 3), 9, np.int8), "outside int4's range -8..7"),
    ("bfloat16", np.zeros((2, 3), np.float32), "store its raw bits as uint16"),
    ("string", np.zeros((2, 3), np.float32), "unicode"),
    ("float32", np.zeros((2, 3), np.float64), "the model expects float32"),
])
def test_npz_of_the_wrong_type_is_refused_with_what_to_store(tmp_path: Path, dtype: str, array: np.ndarray,
                                                              words: str) -> None:
    with pytest.raises(InputError, match=words):
        load_npz(npz(tmp_path, x=array), spec(dtype))


def test_sequences_and_maps_are_refused_naming_what_to_do(tmp_path: Path) -> None:
    seq = [InputSpec("s", (), "seq(tensor(float))")]
    with pytest.raises(InputError, match="input 's' is a seq.*feeds tensors only.*SequenceConstruct"):
        random_inputs(seq, {"s": ()}, {})
    with pytest.raises(InputError, match="feeds tensors only"):
        load_npz(npz(tmp_path, s=np.zeros(2, np.float32)), seq)
    with pytest.raises(InputError, match="build the map inside the graph"):
        random_inputs([InputSpec("m", (), "map(int64,tensor(float))")], {"m": ()}, {})


def test_optional_tensor_input_is_fed_a_tensor() -> None:
    opt = helper.make_optional_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, [2]))
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"], name="id")], "g",
                              [helper.make_value_info("x", opt)], [helper.make_value_info("y", opt)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    prof = layerperf.profile(model, warmup=0, runs=1, latency=False)
    assert [layer.name for layer in prof.layers] == ["id"]


def test_wrong_channel_count_is_one_line_with_ort_message(tmp_path: Path) -> None:
    path = tmp_path / "dyn.onnx"
    onnx.save(tiny_cnn(batch="N"), path)
    proc = run_cli("profile", str(path), "--shape", "input=1x4x16x16", "--runs", "1", "--warmup", "0",
                   "--out", str(tmp_path / "out"))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"layerperf: error: ONNX Runtime cannot run {path}: ")
    assert "Got: 4 Expected: 3" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_kernel_failure_at_run_time_is_a_backend_error() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    s = helper.make_tensor_value_info("s", TensorProto.INT64, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    model = helper.make_model(helper.make_graph([helper.make_node("Reshape", ["x", "s"], ["y"])], "g", [x, s], [y]),
                              opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    sess = Session(model.SerializeToString(), ort.SessionOptions(), "CPUExecutionProvider", what="reshape.onnx")
    with pytest.raises(BackendError) as info:
        sess.run(None, {"x": np.ones(4, np.float32), "s": np.array([3])})
    message = str(info.value)
    assert message.startswith("ONNX Runtime cannot run reshape.onnx: ")
    assert "cannot be reshaped to the requested shape" in message
    assert "onnxruntime_src" not in message and "ReshapeHelper::ReshapeHelper(" not in message


def test_ort_message_keeps_the_check_and_reason_without_the_signature() -> None:
    raw = ("[ONNXRuntimeError] : 1 : FAIL : Non-zero status code returned while running ConvInteger node. "
           "Name:'' Status Message: /src/onnxruntime/conv_integer.cc:52 virtual onnxruntime::common::Status "
           "onnxruntime::ConvInteger::Compute(onnxruntime::OpKernelContext*) const IsScalar(W) was false.\n"
           " Not supported.")
    assert ort_message(Exception(raw)) == ("Non-zero status code returned while running ConvInteger node. "
                                           "Name:'' Status Message: IsScalar(W) was false. Not supported.")


@pytest.mark.parametrize(("raw", "said"), [
    # a returned status (ORT_RETURN_IF_NOT): the file's name and the function's bare name
    ("[ONNXRuntimeError] : 1 : FAIL : Non-zero status code returned while running Resize node. Name:'' Status "
     "Message: upsamplebase.h:548 ScalesValidation Scale value should be greater than 0.",
     "Non-zero status code returned while running Resize node. Name:'' Status Message: Scale value should be "
     "greater than 0."),
    ("[ONNXRuntimeError] : 1 : FAIL : Non-zero status code returned while running MatMul node. Name:'mm' Status "
     "Message: matmul_helper.h:59 Compute MatMul dimension mismatch",
     "Non-zero status code returned while running MatMul node. Name:'mm' Status Message: MatMul dimension mismatch"),
    # a status wrapped in a failed call's exception: both locations and the inner status prefix left out
    ("[ONNXRuntimeError] : 1 : FAIL : Non-zero status code returned while running ConstantOfShape node. Name:'' "
     "Status Message: /onnxruntime_src/onnxruntime/core/framework/op_kernel.cc:87 virtual OrtValue* "
     "onnxruntime::OpKernelContext::OutputMLValue(int, const onnxruntime::TensorShape&) [ONNXRuntimeError] : 1 : "
     "FAIL : tensor.cc:57 CalculateTensorStorageSize Tensor shape.Size() must be >= 0\n",
     "Non-zero status code returned while running ConstantOfShape node. Name:'' Status Message: Tensor "
     "shape.Size() must be >= 0"),
])
def test_ort_message_leaves_out_a_returned_status_location(raw: str, said: str) -> None:
    assert ort_message(Exception(raw)) == said


def test_a_failed_scale_check_is_one_line_without_its_cpp_location(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The onnx node test test_resize_upsample_scales_linear fed a zero scale: ONNX Runtime's status names the
    header, line and function that refused it; the error says why only."""
    from layerperf.cli import main

    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 1, 2, 2])
    scales = helper.make_tensor_value_info("scales", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 1, 4, 4])
    graph = helper.make_graph([helper.make_node("Resize", ["X", "", "scales"], ["Y"], mode="linear")], "g",
                              [x, scales], [y])
    path = tmp_path / "resize.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=9), path)
    np.savez(tmp_path / "in.npz", scales=np.array([1, 1, 0, 2], np.float32))
    assert main(["profile", str(path), "--inputs", str(tmp_path / "in.npz"), "--runs", "1", "--warmup", "0",
                 "--no-latency"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.endswith("Status Message: Scale value should be greater than 0.\n"), err
    assert "upsamplebase" not in err and "ScalesValidation" not in err


def test_stepwise_executor_feeds_types_numpy_lacks() -> None:
    model = one_op(TensorProto.BFLOAT16, "Cast", TensorProto.FLOAT, to=TensorProto.FLOAT)
    feed = make_feed(model, [InputSpec("x", tuple(SHAPE), "bfloat16")])
    outputs, times = StepwiseExecutor(model, ["op"]).run_pass(feed)
    np.testing.assert_array_equal(outputs["y"].numpy(), feed["x"].astype(np.float32))
    assert len(times) == 1


def test_counting_worker_feed_keeps_types_numpy_lacks(tmp_path: Path) -> None:
    arr = np.array([1.5, -2], np.float32).astype(ml_dtypes.float8_e4m3fn)
    np.savez(tmp_path / "f.npz", x=_storable(arr))
    with np.load(tmp_path / "f.npz") as data:
        back = _restored(data["x"], arr.dtype.name)
    assert back.dtype == arr.dtype
    np.testing.assert_array_equal(back, arr)


def test_a_file_that_is_no_npz_is_named_so(tmp_path: Path) -> None:
    path = tmp_path / "inputs.npz"
    path.write_bytes(b"\x08\x07\x12\x07pytorch")  # an .onnx file given by mistake
    specs = [InputSpec("x", (1, 3), "float32")]
    with pytest.raises(InputError, match="is not an .npz file") as exc:
        load_npz(path, specs)
    assert "pickle" not in str(exc.value) and "numpy.savez" in (exc.value.hint or "")


def test_inputs_sharing_a_symbolic_dimension_follow_the_one_given(tmp_path: Path) -> None:
    # a dynamo export names the sequence dim of input_ids and attention_mask alike: --shape on one sizes both
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"])
    mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"])
    out = helper.make_tensor_value_info("y", TensorProto.INT64, None)
    graph = helper.make_graph([helper.make_node("Add", ["input_ids", "attention_mask"], ["y"])], "g", [ids, mask],
                              [out])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    specs = [InputSpec("input_ids", ("batch", "sequence"), "int64"),
             InputSpec("attention_mask", ("batch", "sequence"), "int64")]
    feed = make_feed(model, specs, ["input_ids=2x64"])
    assert feed["attention_mask"].shape == (2, 64)
    np.savez(tmp_path / "ids.npz", input_ids=np.zeros((1, 32), np.int64))  # an array given sizes it too
    assert make_feed(model, specs, [], tmp_path / "ids.npz")["attention_mask"].shape == (1, 32)
    assert make_feed(model, specs)["attention_mask"].shape == (1, 128)  # the defaults otherwise
