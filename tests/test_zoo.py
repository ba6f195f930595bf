"""Tests for the built-in model zoo: validity, compute, shapes, caching, errors, determinism."""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, shape_inference

from layerperf.errors import InputError
from layerperf.models import zoo
from layerperf.models.zoo.vision import adaptive_pool_matrix
from layerperf.util import atomic

ALL_MODELS = ["bert-base", "gpt2-small", "lstm", "mobilenet_v2", "resnet18", "resnet50", "vgg16"]
VISION = ["mobilenet_v2", "resnet18", "resnet50", "vgg16"]

# Published compute at 224 px, batch 1, in GMACs (torchvision's model cards).
PUBLISHED_GMACS = {"resnet50": 4.1, "resnet18": 1.8, "vgg16": 15.5, "mobilenet_v2": 0.30}
# Parameter counts of the reference implementations (torchvision; Hugging Face BertModel without
# its pooler, GPT2LMHeadModel with the tied head).
PUBLISHED_PARAMS = {
    "resnet18": 11_689_512,
    "resnet50": 25_557_032,
    "mobilenet_v2": 3_504_872,
    "vgg16": 138_357_544,
    "bert-base": 108_891_648,
    "gpt2-small": 124_439_808,
}

# The vision models are built at their defaults (the MAC figures are for 224 px, batch 1); the
# others at small, non-default sizes so that running them stays cheap.
TEST_ARGS: dict[str, dict[str, int]] = {
    "bert-base": {"batch": 2, "seq_len": 16},
    "gpt2-small": {"batch": 2, "seq_len": 16},
    "lstm": {"batch": 2, "seq_len": 8},
}


def _expected_io(name: str) -> tuple[dict[str, list[int]], list[int]]:
    """Input shapes and the first output's shape for ``build(name, **TEST_ARGS[name])``."""
    args = TEST_ARGS.get(name, {})
    batch, seq = args.get("batch", 1), args.get("seq_len", 128)
    if name in VISION:
        return {"input": [1, 3, 224, 224]}, [1, 1000]
    if name == "bert-base":
        return {"input_ids": [batch, seq], "attention_mask": [batch, seq]}, [batch, seq, 768]
    if name == "gpt2-small":
        return {"input_ids": [batch, seq]}, [batch, seq, 50257]
    return {"input": [seq, batch, 256]}, [batch, 10]


@pytest.fixture(scope="module")
def model() -> Callable[[str], onnx.ModelProto]:
    """Builds each model once per module (the big ones take seconds) at its TEST_ARGS."""
    built: dict[str, onnx.ModelProto] = {}

    def get(name: str) -> onnx.ModelProto:
        if name not in built:
            built[name] = zoo.build(name, **TEST_ARGS.get(name, {}))
        return built[name]

    return get


def _feeds(session: ort.InferenceSession) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    feeds: dict[str, np.ndarray] = {}
    for arg in session.get_inputs():
        shape = [int(d) for d in arg.shape]
        if arg.name == "attention_mask":
            mask = np.ones(shape, dtype=np.int64)
            mask[-1, shape[1] // 2 :] = 0  # the last sequence is padded: exercises the mask path
            feeds[arg.name] = mask
        elif arg.type == "tensor(int64)":
            feeds[arg.name] = rng.integers(0, 1000, size=shape, dtype=np.int64)
        else:
            feeds[arg.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def _run(m: onnx.ModelProto) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(m.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, _feeds(session))


def _inferred_shapes(m: onnx.ModelProto) -> dict[str, list[int]]:
    """Static shapes of every tensor, from shape inference on a weightless copy of the graph.

    Float initializers become typed graph inputs, so inference skips copying hundreds of MB;
    the int64 ones (Reshape shapes, axes) stay because inference needs their values.
    """
    g = m.graph
    consts = [t for t in g.initializer if t.data_type == TensorProto.INT64]
    weights = [
        helper.make_tensor_value_info(t.name, t.data_type, t.dims)
        for t in g.initializer
        if t.data_type != TensorProto.INT64
    ]
    skeleton = helper.make_model(
        helper.make_graph(g.node, g.name, [*g.input, *weights], g.output, initializer=consts),
        opset_imports=m.opset_import,
        ir_version=m.ir_version,
    )
    inferred = shape_inference.infer_shapes(skeleton, strict_mode=True).graph
    return {
        vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim]
        for vi in [*inferred.value_info, *inferred.input, *inferred.output]
    }


def count_macs(m: onnx.ModelProto) -> int:
    """Multiply-accumulates of Conv, Gemm and MatMul nodes (1 MAC = one multiply-add)."""
    shapes = _inferred_shapes(m)
    total = 0
    for node in m.graph.node:
        if node.op_type == "Conv":
            weight = shapes[node.input[1]]  # [Cout, Cin/groups, kh, kw]
            total += math.prod(shapes[node.output[0]]) * math.prod(weight[1:])
        elif node.op_type == "Gemm":
            trans_b = any(a.name == "transB" and a.i for a in node.attribute)
            rows, inner = shapes[node.input[0]]
            b = shapes[node.input[1]]
            total += rows * inner * (b[0] if trans_b else b[1])
        elif node.op_type == "MatMul":
            total += math.prod(shapes[node.output[0]]) * shapes[node.input[0]][-1]
    return total


# -- registry and description --------------------------------------------------------------------


def test_names_are_sorted_and_complete() -> None:
    assert zoo.names() == sorted(ALL_MODELS + ["kernels-conv", "kernels-dense", "kernels-rnn"])  # and the sweeps


@pytest.mark.parametrize("name", ALL_MODELS)
def test_describe_is_one_line_with_shape_and_params(name: str) -> None:
    text = zoo.describe(name)
    assert "\n" not in text and text.startswith(f"{name}: ")
    expected_input = {"lstm": "[128, 1, 256]", "bert-base": "[1, 128]", "gpt2-small": "[1, 128]"}
    assert expected_input.get(name, "[1, 3, 224, 224]") in text
    assert "M params" in text
    if name in PUBLISHED_PARAMS:
        assert f"({PUBLISHED_PARAMS[name]:,})" in text


# -- every model is valid ONNX and runs ----------------------------------------------------------


@pytest.mark.parametrize("name", [
    # vgg16 at 224 px runs 15.5 GMACs (10 s); its graph is checked at 64 px below on every run (LAYERPERF_SLOW=1)
    pytest.param(n, marks=pytest.mark.skipif(not os.environ.get("LAYERPERF_SLOW"), reason="slow: set LAYERPERF_SLOW=1"))
    if n == "vgg16" else n for n in ALL_MODELS])
def test_model_checks_and_runs(model: Callable[[str], onnx.ModelProto], name: str) -> None:
    m = model(name)
    onnx.checker.check_model(m, full_check=True)
    assert m.opset_import[0].version == 17 and m.ir_version <= 9

    inputs, output_shape = _expected_io(name)
    assert {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim] for i in m.graph.input} == inputs
    outputs = _run(m)
    assert list(outputs[0].shape) == output_shape
    assert all(np.isfinite(o).all() for o in outputs)
    assert float(np.std(outputs[0])) > 0.0  # not a degenerate constant output


@pytest.mark.parametrize("name", ALL_MODELS)
def test_nodes_and_initializers_are_named_uniquely(model: Callable[[str], onnx.ModelProto], name: str) -> None:
    m = model(name)
    node_names = [n.name for n in m.graph.node]
    assert all(node_names) and len(set(node_names)) == len(node_names)
    init_names = [t.name for t in m.graph.initializer]
    assert all(init_names) and len(set(init_names)) == len(init_names)


def test_bert_output_name(model: Callable[[str], onnx.ModelProto]) -> None:
    assert [o.name for o in model("bert-base").graph.output] == ["last_hidden_state"]
    assert [o.name for o in model("gpt2-small").graph.output] == ["logits"]


# -- compute -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", VISION)
def test_macs_match_published_figures(model: Callable[[str], onnx.ModelProto], name: str) -> None:
    gmacs = count_macs(model(name)) / 1e9
    assert gmacs == pytest.approx(PUBLISHED_GMACS[name], rel=0.03)


# -- arguments change the shapes -----------------------------------------------------------------


def test_batch_and_image_size_change_vision_shapes() -> None:
    m = zoo.build("resnet18", batch=3, image_size=64, seq_len=7)  # seq_len is ignored
    assert _inferred_shapes(m)["input"] == [3, 3, 64, 64]
    (logits,) = _run(m)
    assert logits.shape == (3, 1000) and np.isfinite(logits).all()


@pytest.mark.parametrize("image_size", [32, 96])
def test_mobilenet_other_image_sizes(image_size: int) -> None:
    (logits,) = _run(zoo.build("mobilenet_v2", batch=2, image_size=image_size))
    assert logits.shape == (2, 1000) and np.isfinite(logits).all()


def test_vgg16_small_image_keeps_classifier_shape() -> None:
    # 64 px leaves a 2x2 feature map, which the adaptive pool must stretch to 7x7 for fc1.
    shapes = _inferred_shapes(zoo.build("vgg16", batch=2, image_size=64))
    assert shapes["avgpool.cols"] == [2, 512, 7, 7]
    assert shapes["logits"] == [2, 1000]


def test_seq_len_and_batch_change_text_shapes() -> None:
    m = zoo.build("lstm", batch=3, seq_len=5, image_size=999)  # image_size is ignored
    assert _inferred_shapes(m)["input"] == [5, 3, 256]
    (logits,) = _run(m)
    assert logits.shape == (3, 10)


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 9, 14, 20])
def test_adaptive_pool_matrix_matches_torch_bins(size: int) -> None:
    matrix = adaptive_pool_matrix(size, 7)
    for i, row in enumerate(matrix):
        start, end = math.floor(i * size / 7), math.ceil((i + 1) * size / 7)
        expected = np.zeros(size, dtype=np.float32)
        expected[start:end] = 1.0 / (end - start)
        np.testing.assert_allclose(row, expected)
    if size == 7:
        np.testing.assert_array_equal(matrix, np.eye(7, dtype=np.float32))


# -- path() and the on-disk cache ----------------------------------------------------------------


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("LAYERPERF_CACHE", str(tmp_path))
    return tmp_path / "zoo"


def test_path_builds_once_and_reuses_the_file(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = zoo.path("lstm", batch=2, seq_len=4)
    assert first.parent == cache and first.is_file()
    assert "lstm" in first.name and "b2" in first.name and "seq4" in first.name
    assert f"v{zoo.BUILDER_VERSION}" in first.name
    mtime = first.stat().st_mtime_ns

    def no_rebuild(*args: object, **kwargs: object) -> None:
        raise AssertionError("path() rebuilt a cached model")

    with monkeypatch.context() as patch:
        patch.setattr(zoo, "_build", no_rebuild)
        second = zoo.path("lstm", batch=2, seq_len=4, image_size=64)  # image_size does not matter here
    assert second == first and second.stat().st_mtime_ns == mtime

    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE(first.stat().st_mode) == 0o666 & ~umask  # not mkstemp's private 0600
    assert onnx.load(first).SerializeToString() == zoo.build("lstm", batch=2, seq_len=4).SerializeToString()
    assert zoo.path("lstm", batch=2, seq_len=5) != first  # other arguments, other file


def test_path_writes_atomically(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    with monkeypatch.context() as patch:
        patch.setattr(atomic.os, "replace", failing_replace)  # where the zoo's file is put in place
        with pytest.raises(OSError, match="disk full"):
            zoo.path("lstm", seq_len=3)
    assert list(cache.iterdir()) == []  # neither a half-written model nor a leftover temp file

    done = zoo.path("lstm", seq_len=3)
    assert [p.name for p in cache.iterdir()] == [done.name]


def test_default_cache_dir_is_under_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("LAYERPERF_CACHE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert zoo.cache_dir() == tmp_path / ".cache" / "layerperf" / "zoo"


# -- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize("call", [zoo.build, zoo.path, zoo.describe])
def test_unknown_name_raises_input_error(call: Callable[[str], object]) -> None:
    with pytest.raises(InputError) as info:
        call("resnet51")
    assert info.value.message == "unknown model 'resnet51'"
    assert info.value.hint is not None and "resnet50" in info.value.hint and "bert-base" in info.value.hint


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [
        ("resnet18", {"batch": 0}),
        ("resnet18", {"batch": True}),
        ("resnet18", {"batch": 1.0}),
        ("resnet18", {"image_size": 16}),
        ("resnet18", {"seed": -1}),
        ("resnet18", {"seq_len": 0}),
        ("bert-base", {"seq_len": 513}),
        ("gpt2-small", {"seq_len": 1025}),
        ("lstm", {"seq_len": 0}),
    ],
)
def test_bad_arguments_raise_input_error(cache: Path, name: str, kwargs: dict[str, object]) -> None:
    with pytest.raises(InputError):
        zoo.build(name, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(InputError):
        zoo.path(name, **kwargs)  # type: ignore[arg-type]


# -- determinism ---------------------------------------------------------------------------------


def test_same_seed_same_bytes_other_seed_other_weights() -> None:
    first = zoo.build("resnet18", image_size=32, seed=3).SerializeToString()
    assert zoo.build("resnet18", image_size=32, seed=3).SerializeToString() == first
    assert zoo.build("resnet18", image_size=32, seed=4).SerializeToString() != first
