"""The kernel sweeps of the zoo (``kernels-conv``, ``kernels-dense``, ``kernels-rnn``): valid models whose
declared shapes are what ONNX Runtime computes, a fixed number of every kind of kernel, fused by the runtime
as whole models fuse them, the same for the same seed; and ``predict --evaluate`` trains on them without
holding them out."""

from __future__ import annotations

import collections
import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from layerperf.cli import main
from layerperf.errors import InputError
from layerperf.models import zoo
from layerperf.models.zoo import kernels
from layerperf.models.zoo._graph import GraphBuilder
from predict_store import MODELS, write_store

SWEEPS = ["kernels-conv", "kernels-dense", "kernels-rnn"]
SMALL = {"kernels-conv": {"image_size": 64}, "kernels-dense": {"seq_len": 16}, "kernels-rnn": {"seq_len": 8}}


@pytest.fixture(scope="module")
def built() -> dict[str, onnx.ModelProto]:
    return {name: zoo.build(name, batch=2, **SMALL[name]) for name in SWEEPS}  # type: ignore[arg-type]


def _counts(kinds: list[tuple[int, str]]) -> dict[str, int]:
    """A sweep's quota: branches by kind."""
    return {kind: n for n, kind in kinds}


def _fed(model: onnx.ModelProto) -> dict[str, list[int]]:
    """Each branch input the model makes (an Expand's output) and its shape."""
    consts = {t.name: onnx.numpy_helper.to_array(t).tolist() for t in model.graph.initializer
              if t.name.startswith("const.ints")}
    return {n.output[0]: consts[n.input[1]] for n in model.graph.node if n.op_type == "Expand"}


def test_the_sweeps_are_built_in_and_told_apart() -> None:
    assert set(SWEEPS) <= set(zoo.names())
    assert all(zoo.is_sweep(n) for n in SWEEPS)
    assert not any(zoo.is_sweep(n) for n in ("resnet50", "bert-base", "model.onnx", None))
    for name in SWEEPS:
        text = zoo.describe(name)
        assert "\n" not in text and text.startswith(f"{name}: kernel sweep") and "input source float32[1]" in text


@pytest.mark.parametrize("name", SWEEPS)
def test_a_sweep_checks_and_runs_from_one_small_input(built: dict[str, onnx.ModelProto], name: str) -> None:
    """Every branch's input is made in the graph at the batch asked for, every output is a scalar."""
    model = built[name]
    onnx.checker.check_model(model, full_check=True)
    assert [(i.name, [d.dim_value for d in i.type.tensor_type.shape.dim]) for i in model.graph.input] == \
        [("source", [1])]
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    outputs = session.run(None, {"source": np.array([0.25], dtype=np.float32)})
    splits = _counts(kernels._DENSE_KINDS)["split"]  # three outputs each
    branches = {"kernels-conv": kernels.CONV_BRANCHES + kernels.POOL_BRANCHES,
                "kernels-dense": kernels.DENSE_BRANCHES + 2 * splits, "kernels-rnn": kernels.RNN_BRANCHES}
    assert len(outputs) == len(model.graph.output) == branches[name]
    assert all(o.shape == () and np.isfinite(o) for o in outputs)
    made = list(_fed(model).values())
    assert made and all(shape[1 if name == "kernels-rnn" else 0] == 2 for shape in made)  # the batch


def test_every_kind_of_kernel_is_in_every_sweep(built: dict[str, onnx.ModelProto]) -> None:
    conv = built["kernels-conv"]
    branches = {".".join(n.name.split(".")[:2]) for n in conv.graph.node if n.name.startswith(("conv", "pool"))}
    counted = collections.Counter(b.split(".")[1] for b in branches if b.startswith("conv"))
    assert counted == _counts(kernels._CONV_KINDS)
    assert len({b.split(".")[0] for b in branches if b.startswith("pool")}) == kernels.POOL_BRANCHES
    groups = [a.i for n in conv.graph.node if n.op_type == "Conv" for a in n.attribute if a.name == "group"]
    assert sum(g > 1 for g in groups) == _counts(kernels._CONV_KINDS)["depthwise"]
    dense = {".".join(n.name.split(".")[:2]) for n in built["kernels-dense"].graph.node if n.name.startswith("dense")}
    assert collections.Counter(b.split(".")[1] for b in dense) == _counts(kernels._DENSE_KINDS)
    rnn = [n.op_type for n in built["kernels-rnn"].graph.node if n.op_type not in ("Expand", "ReduceMean")]
    assert len(rnn) == kernels.RNN_BRANCHES and set(rnn) == {"LSTM", "GRU"}


def test_branches_keep_within_the_caps(built: dict[str, onnx.ModelProto]) -> None:
    model = built["kernels-conv"]  # at batch 2
    weights = {t.name: t.dims for t in model.graph.initializer}
    shapes = _fed(model)
    convs = [n for n in model.graph.node if n.op_type == "Conv"]
    assert len(convs) == kernels.CONV_BRANCHES
    for node in convs:
        w, x = weights[node.input[1]], shapes[node.input[0]]
        stride = next(a.ints[0] for a in node.attribute if a.name == "strides")
        out = (x[2] + 2 * (w[2] // 2) - w[2]) // stride + 1
        assert 2 * w[0] * w[1] * w[2] * w[3] * out * out <= kernels.CONV_FLOPS
        assert int(np.prod(w)) <= kernels.MAX_WEIGHT
        assert max(int(np.prod(x)), 2 * w[0] * out * out) <= 2 * kernels.MAX_ACTIVATION


@pytest.mark.parametrize("name", SWEEPS)
def test_no_branch_outgrows_the_caps_at_the_largest_sizes_allowed(name: str) -> None:
    """Every tensor a branch is fed and every linear layer's and convolution's output within MAX_ACTIVATION
    elements at batch 1, each layer's work and weight within its cap, at the largest image and sequence a sweep
    may be built for (uncapped, a Softmax of 12 x 7037 x 7037 at seq_len 4096 took 2.4 GB at batch 1)."""
    spec = zoo.lookup(name)
    for seed in range(3):
        g = GraphBuilder(name, seed, materialize=False)
        spec.builder(g, 1, spec.max_size)
        fed = [[int(v) for v in n.input[1].removeprefix("const.ints.").split("_")]
               for n in g.nodes if n.op_type == "Expand"]
        assert fed and all(math.prod(shape) <= kernels.MAX_ACTIVATION for shape in fed)
    # the layers' outputs, work and weights, from a build with weights
    model = zoo.build(name, batch=1, **{spec.size_arg: spec.max_size})  # type: ignore[arg-type]
    weights = {t.name: t.dims for t in model.graph.initializer}
    shapes = _fed(model)
    for node in (n for n in model.graph.node if n.op_type == "MatMul" and n.input[1] in weights):
        w = weights[node.input[1]]
        tokens = math.prod(shapes[node.input[0]][:-1]) if node.input[0] in shapes else None
        if tokens is not None:
            assert tokens * w[-1] <= kernels.MAX_ACTIVATION and 2 * tokens * w[0] * w[1] <= kernels.MAX_FLOPS
        assert math.prod(w) <= (kernels.MAX_WEIGHT if ".head." in node.name else kernels.LAYER_WEIGHT)
    for node in (n for n in model.graph.node if n.op_type in ("Gemm", "Gather")):
        assert math.prod(weights[node.input[1] if node.op_type == "Gemm" else node.input[0]]) <= \
            (kernels.MAX_WEIGHT if node.op_type == "Gemm" else kernels.LAYER_WEIGHT)
    for node in (n for n in model.graph.node if n.op_type == "Conv"):
        w, x = weights[node.input[1]], shapes[node.input[0]]
        stride = next(a.ints[0] for a in node.attribute if a.name == "strides")
        out = (x[2] + 2 * (w[2] // 2) - w[2]) // stride + 1
        assert 2 * w[0] * w[1] * w[2] * w[3] * out * out <= kernels.CONV_FLOPS
        assert w[0] * out * out <= kernels.MAX_ACTIVATION and math.prod(w) <= kernels.MAX_WEIGHT
    for node in (n for n in model.graph.node if n.op_type in ("LSTM", "GRU")):
        assert math.prod(weights[node.input[1]]) + math.prod(weights[node.input[2]]) <= 8 * 1024 * 1024


def _drawn(name: str, seed: int) -> tuple[list[tuple[object, ...]], list[tuple[str, str]]]:
    """The shapes a sweep drew and its nodes, walked without making weights."""
    g = GraphBuilder(name, seed, materialize=False)
    zoo.lookup(name).builder(g, 1, 32)
    return [key for kind, key in g._consts if kind == "ints"], [(n.op_type, str(n.attribute)) for n in g.nodes]


def test_the_same_seed_gives_the_same_sweep_and_another_another() -> None:
    for name in SWEEPS:
        assert _drawn(name, 0)[0] != _drawn(name, 1)[0]
        small = {"image_size": 32} if name == "kernels-conv" else {"seq_len": 8}
        one = zoo.build(name, batch=1, **small)  # type: ignore[arg-type]
        assert one.SerializeToString() == zoo.build(name, batch=1, **small).SerializeToString()  # type: ignore[arg-type]


def test_the_runtime_fuses_a_sweep_as_it_fuses_whole_models(built: dict[str, onnx.ModelProto],
                                                             tmp_path: Path) -> None:
    """The sweep's layers are the fused kernels whole models run: a GELU whose last op wrote a graph output was
    left unfused (Pow, Tanh, Mul rows, never a FastGelu)."""
    types = {}
    for name in ("kernels-conv", "kernels-dense"):
        options = ort.SessionOptions()
        options.optimized_model_filepath = str(tmp_path / f"{name}.onnx")
        options.log_severity_level = 3
        ort.InferenceSession(built[name].SerializeToString(), options, providers=["CPUExecutionProvider"])
        types[name] = collections.Counter(n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node)
    dense, quota = types["kernels-dense"], _counts(kernels._DENSE_KINDS)
    assert dense["FastGelu"] == quota["gelu_tanh"] and dense["Gelu"] == quota["gelu_erf"]
    assert dense["SkipLayerNormalization"] == quota["skip_layernorm"] and "Tanh" not in dense and "Erf" not in dense
    # branches without weights that draw the same shape are one kernel to the runtime (it merges them)
    for kind, op in (("softmax", "Softmax"), ("transpose", "Transpose")):
        drawn = {tuple(shape) for made, shape in _fed(built["kernels-dense"]).items() if f".{kind}." in made}
        assert dense[op] == len(drawn) and 1 <= len(drawn) <= quota[kind]
    assert dense["FusedGemm"] == quota["gemm"] // 2  # every other Gemm has its ReLU fused in
    conv = types["kernels-conv"]
    assert conv["Conv"] == kernels.CONV_BRANCHES and "BatchNormalization" not in conv and "Relu" not in conv


def test_evaluation_trains_on_sweeps_and_never_holds_them_out(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("sklearn", reason="the predict extra (scikit-learn) is not installed")
    from layerperf.dataset.predict import evaluate, training

    models = {"synth-a": MODELS["synth-a"], "synth-b": MODELS["synth-b"], "kernels-conv": MODELS["synth-e"]}
    store = write_store(tmp_path / "with-sweep.db", models)
    assert main(["predict", "--store", str(store), "--evaluate", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc["per_model"]) == {"synth-a", "synth-b"} and doc["sweeps"] == ["kernels-conv"]
    assert doc["pairs"] == 8 and {p["model"] for p in doc["configurations"]} == {"synth-a", "synth-b"}
    assert doc["within_10pct"] >= 0.9  # the sweep follows the same rates

    trained_on: list[set[str]] = []
    fit = evaluate.Predictor.fit

    def recording(configs: list[training.MeasuredConfig], *args: object, **kwargs: object) -> evaluate.Predictor:
        trained_on.append({c.model for c in configs})
        return fit(configs, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(evaluate.Predictor, "fit", staticmethod(recording))
    ev = evaluate.leave_one_model_out(training.read(store))
    assert ev.sweeps == ("kernels-conv",)
    assert trained_on == [{"synth-b", "kernels-conv"}, {"synth-a", "kernels-conv"}]  # in every turn

    data = training.read(store)
    unmeasured = dataclasses.replace(data, configs=tuple(
        c if c.model == "kernels-conv" else dataclasses.replace(c, latency_us=None) for c in data.configs))
    with pytest.raises(InputError, match="no configuration with a measured latency"):
        evaluate.leave_one_model_out(unmeasured)  # the sweep's latencies are no pairs to score
    one = write_store(tmp_path / "one-model.db", {"synth-a": MODELS["synth-a"], "kernels-conv": MODELS["synth-e"]})
    with pytest.raises(InputError, match="holds 1 .synth-a. beside the kernel sweeps kernels-conv"):
        evaluate.leave_one_model_out(training.read(one))
