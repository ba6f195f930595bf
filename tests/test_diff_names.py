"""``layerperf diff`` pairs the nodes of real ONNX Runtime profiles of one model across optimization
levels and onnxruntime.quantization, whatever names the transformations gave them.

The model has three Conv+Relu blocks of distinct output sizes (16x20x20, 32x10x10, 48x5x5), named
the way PyTorch's exporter names nodes. What ground truth a pair must meet comes from what the runtime
recorded, not from names: two paired convolutions must have made an output of the same dimensions
(in any layout: NCHW, NCHWc or the NHWC of quantized convolutions).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import orjson
import pytest
from onnx import TensorProto, helper, numpy_helper

import layerperf
from layerperf.analysis.matching import Node, op_family, pair_nodes
from layerperf.cli import main
from layerperf.data.profile import Profile

CHANNELS = (16, 32, 48)


def _blocks_model() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    nodes, inits, x, cin = [], [], "pixel_values", 3
    for i, cout in enumerate(CHANNELS):
        w = numpy_helper.from_array(rng.standard_normal((cout, cin, 3, 3)).astype(np.float32) * 0.1, f"w{i}")
        inits.append(w)
        conv_out = f"/blocks.{i}/conv/Conv_output_0"
        relu_out = "out" if i == len(CHANNELS) - 1 else f"/blocks.{i}/act/Relu_output_0"
        nodes += [helper.make_node("Conv", [x, w.name], [conv_out], name=f"/blocks.{i}/conv/Conv", pads=[1, 1, 1, 1],
                                   strides=[1, 1] if i == 0 else [2, 2]),
                  helper.make_node("Relu", [conv_out], [relu_out], name=f"/blocks.{i}/act/Relu")]
        x, cin = relu_out, cout
    graph = helper.make_graph(nodes, "blocks", [helper.make_tensor_value_info("pixel_values", TensorProto.FLOAT,
                                                                             [1, 3, 20, 20])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 48, 5, 5])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


class _Calibration:
    def __init__(self) -> None:
        rng = np.random.default_rng(1)
        self._data: Iterator[dict[str, np.ndarray]] = iter(
            [{"pixel_values": rng.standard_normal((1, 3, 20, 20)).astype(np.float32)} for _ in range(4)])

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._data, None)


@pytest.fixture(scope="module")
def profiles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Profile]:
    from onnxruntime.quantization import QuantFormat, quantize_static

    tmp = tmp_path_factory.mktemp("names")
    fp32, int8 = tmp / "blocks.onnx", tmp / "blocks_int8.onnx"
    onnx.save(_blocks_model(), fp32)
    quantize_static(str(fp32), str(int8), _Calibration(), quant_format=QuantFormat.QOperator)  # type: ignore[arg-type]
    out = {}
    for key, path, level in (("all", fp32, "all"), ("disable", fp32, "disable"), ("int8", int8, "all")):
        prof = layerperf.profile(path, runs=2, warmup=1, opt_level=level, latency=False)
        layerperf.save(prof, tmp / key)
        out[key] = prof
    return out


def _nodes(prof: Profile) -> list[Node]:
    return [Node(la.name, la.op_type, tuple(t.name for t in la.outputs)) for la in prof.layers]


def _dims(prof: Profile, index: int) -> list[int]:
    return sorted(d for t in prof.layers[index].outputs for d in t.shape if isinstance(d, int))


@pytest.mark.parametrize("b_key", ["disable", "int8"])
def test_every_convolution_pairs_with_the_one_that_made_the_same_output(profiles: dict[str, Profile],
                                                                        b_key: str) -> None:
    a, b = profiles["all"], profiles[b_key]
    na, nb = _nodes(a), _nodes(b)
    convs_a = [i for i, n in enumerate(na) if op_family(n.op_type) == "Conv"]
    convs_b = [j for j, n in enumerate(nb) if op_family(n.op_type) == "Conv"]
    assert len(convs_a) == len(convs_b) == len(CHANNELS)  # the runtime ran one convolution per block
    pairing = pair_nodes(na, nb)
    partner = {i: j for i, j, _ in pairing.pairs}
    for i in convs_a:
        assert i in partner, f"{na[i].name} ({na[i].op_type}) left unpaired"
        j = partner[i]
        assert op_family(nb[j].op_type) == "Conv"
        assert _dims(a, i) == _dims(b, j), (na[i].name, nb[j].name)
    common = {n.name for n in na} & {n.name for n in nb}
    assert len(pair_nodes(na, nb, "exact").pairs) == len(common) < len(pairing.pairs)


def _diff_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["diff", *argv, "--format", "json"]) == 0
    doc: dict[str, Any] = orjson.loads(capsys.readouterr().out)
    return doc


def test_diff_reports_matches_per_rule(profiles: dict[str, Profile], capsys: pytest.CaptureFixture[str]) -> None:
    root = Path(str(profiles["all"].metadata.model.path)).parent
    a, b = str(root / "all"), str(root / "int8")
    expected = pair_nodes(_nodes(profiles["all"]), _nodes(profiles["int8"]))
    doc = _diff_json(capsys, a, b)
    totals = doc["totals"]
    assert totals["matched"] == len(expected.pairs) == sum(totals["matched_by"].values())
    assert totals["matched_by"] == expected.counts()
    assert (totals["nodes_a"], totals["nodes_b"]) == (len(profiles["all"].layers), len(profiles["int8"].layers))
    assert totals["only_in_a"] == len(expected.only_a) and totals["only_in_b"] == len(expected.only_b)
    paired = [r for r in doc["rows"] if r["match"]]
    assert len(paired) == len(expected.pairs)
    assert all(r["key_b"] and r["time_a_us"] and r["time_b_us"] and not r["only_in"] for r in paired)
    exact = _diff_json(capsys, a, b, "--match", "exact")["totals"]
    common = {la.name for la in profiles["all"].layers} & {la.name for la in profiles["int8"].layers}
    assert exact["matched"] == len(common) and exact["match"] == "exact"
    assert main(["diff", a, b]) == 0
    out = capsys.readouterr().out
    assert f"matched {totals['matched']} of {totals['nodes_a']} nodes in A" in out and "name in B" in out
