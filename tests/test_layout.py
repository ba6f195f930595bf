"""FLOPs are the model's work, not the layout's padding: NCHWc channels at ONNX Runtime's opt level all."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import onnx
import orjson
import pytest
from onnx import TensorProto, helper, numpy_helper

import layerperf
from layerperf.data.profile import Layer, Profile

IR_VERSION = 9
CONV_TYPES = ("Conv", "FusedConv")


def _chain(channels: tuple[int, ...] = (20, 36, 16)) -> onnx.ModelProto:
    """Conv -> BatchNormalization -> Relu blocks with channel counts that fill no NCHWc block of 8 or
    16, then a pool and a Gemm head; a chain, so its Convs keep their order through any optimization."""
    rng = np.random.default_rng(0)
    inits, nodes, x, c = [], [], "x", 3
    for i, (co, k) in enumerate(zip(channels, (3, 1, 3), strict=False)):
        inits.append(numpy_helper.from_array((rng.standard_normal((co, c, k, k)) * 0.2).astype(np.float32), f"w{i}"))
        for name, value in (("scale", 1.0), ("shift", 0.1), ("mean", 0.0), ("var", 1.0)):
            inits.append(numpy_helper.from_array(np.full(co, value, np.float32), f"{name}{i}"))
        nodes += [helper.make_node("Conv", [x, f"w{i}"], [f"c{i}"], name=f"conv{i}", kernel_shape=[k, k],
                                   pads=[k // 2] * 4),
                  helper.make_node("BatchNormalization", [f"c{i}", f"scale{i}", f"shift{i}", f"mean{i}", f"var{i}"],
                                   [f"n{i}"], name=f"bn{i}"),
                  helper.make_node("Relu", [f"n{i}"], [f"r{i}"], name=f"relu{i}")]
        x, c = f"r{i}", co
    inits += [numpy_helper.from_array(rng.standard_normal((10, c)).astype(np.float32), "fw")]
    nodes += [helper.make_node("GlobalAveragePool", [x], ["gap"], name="gap"),
              helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"),
              helper.make_node("Gemm", ["flat", "fw"], ["y"], name="fc", transB=1)]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)


def _profile(model: onnx.ModelProto | str, level: str, **kw: int) -> Profile:
    return layerperf.profile(model, runs=1, warmup=0, latency=False, opt_level=level, **kw)


def _out_elems(layer: Layer) -> int:
    (y,) = layer.outputs
    return math.prod(int(d) for d in y.logical().shape or ())


def _has_bias(layer: Layer) -> bool:
    # the Profile keeps the inputs present: X, W, then a 1-D bias (a residual input is 4-D)
    return any(len(t.shape or ()) == 1 for t in layer.inputs[2:])


def _model_work(prof: Profile) -> int:
    """Total FLOPs less what folding BatchNormalization into the Conv before it changes: the
    BatchNormalization layers' own FLOPs, and the bias add each Conv that has a bias does (folding
    gives a Conv without one a bias). Everything else the optimizer fuses keeps its FLOPs."""
    layers = prof.layers
    assert all(la.flops is not None for la in layers), [la.name for la in layers if la.flops is None]
    total = sum(la.flops or 0 for la in layers)
    folded = sum(la.flops or 0 for la in layers if la.op_type == "BatchNormalization")
    biases = sum(_out_elems(la) for la in layers if la.op_type in CONV_TYPES and _has_bias(la))
    return total - folded - biases


def test_zoo_model_flops_agree_across_opt_levels() -> None:
    """mobilenet_v2 (24-channel layers, padded where the NCHWc block is 16): the same work at every
    level, once BatchNormalization folding is accounted for, padded channels or not."""
    work = {level: _model_work(_profile("mobilenet_v2", level, image_size=64)) for level in ("disable", "basic", "all")}
    assert work["disable"] == work["basic"] == work["all"], work


@pytest.fixture(scope="module")
def chain_profiles(tmp_path_factory: pytest.TempPathFactory) -> tuple[Profile, Profile, Path]:
    out = tmp_path_factory.mktemp("chain")
    blocked = _profile(_chain(), "all")
    layerperf.save(blocked, out)
    return _profile(_chain(), "extended"), blocked, out


def test_padded_layers_count_the_unpadded_formula(chain_profiles: tuple[Profile, Profile, Path]) -> None:
    """Each Conv at level all costs what the same Conv costs at level extended (same fusions, plain
    NCHW); where ONNX Runtime padded it — its weights differ from the extended graph's — the layer
    says so, and the padded work is padded_flops."""
    plain, blocked, _ = chain_profiles
    plain_convs = [la for la in plain.layers if la.op_type in CONV_TYPES]
    convs = [la for la in blocked.layers if la.op_type in CONV_TYPES]
    assert len(convs) == len(plain_convs) == 3
    padded = 0
    for want, got in zip(plain_convs, convs, strict=True):
        assert got.flops == want.flops, got.name
        stored, real = got.inputs[1], want.inputs[1]
        assert got.inputs[1].logical().shape == real.shape  # the model's weights, whatever was stored
        if stored.shape != real.shape:
            padded += 1
            assert got.padded and got.padded_flops is not None and got.flops is not None
            assert got.padded_flops > got.flops
            if not got.inputs[0].padded:  # only output channels padded: the work grows with them
                assert got.padded_flops * real.shape[0] == got.flops * stored.shape[0]  # type: ignore[index]
        else:
            assert not got.padded and got.padded_flops is None
    assert sum(la.flops or 0 for la in blocked.layers) == sum(la.flops or 0 for la in plain.layers)
    if not padded:
        pytest.skip("ONNX Runtime padded no channel of this model on this CPU")


def test_padded_shapes_are_marked(chain_profiles: tuple[Profile, Profile, Path]) -> None:
    _, blocked, out = chain_profiles
    padded = [la for la in blocked.layers if la.padded]
    if not padded:
        pytest.skip("ONNX Runtime padded no channel of this model on this CPU")
    with (out / "layers.csv").open(newline="") as f:
        csv_rows = {r["name"]: r for r in csv.DictReader(f)}
    events = {e["name"]: e["args"] for e in orjson.loads((out / "trace.json").read_bytes())["traceEvents"]
              if e.get("cat") == "layer"}
    for layer in padded:
        row = csv_rows[layer.name]
        # in_shapes stays the stored dims, plain; the model's dims are a column of their own
        assert row["in_shapes"] == layer.in_shapes and all(
            d.isdigit() for s in row["in_shapes"].split(";") for d in s.split("x"))
        assert row["real_in_shapes"] == layer.real_in_shapes != layer.in_shapes or \
            row["real_out_shapes"] == layer.real_out_shapes != layer.out_shapes
        assert int(row["flops"]) == layer.flops and int(row["padded_flops"]) == layer.padded_flops
        assert events[layer.name]["real_out_shapes"] == layer.real_out_shapes
        marked = ";".join(t.marked_shape_str() for t in layer.outputs)
        assert "(" in marked or "(" in ";".join(t.marked_shape_str() for t in layer.inputs)
    again = layerperf.load(out)
    assert [la.padded_flops for la in again.layers] == [la.padded_flops for la in blocked.layers]
    assert [la.real_in_shapes for la in again.layers] == [la.real_in_shapes for la in blocked.layers]
