"""``layerperf diff`` of one PyTorch model profiled on ONNX Runtime (exported with PyTorch's legacy
exporter, so node names follow the module paths) and on the torch backend: layers pair by module
scope, never across modules whose shapes differ.

The models mimic Hugging Face's layout: a wrapper's ``model`` attribute (the exporter's ``/model/``
prefix), a bottleneck block whose shortcut conv runs after its ``layer`` Sequential in PyTorch but
before the Sequential's last conv on ONNX Runtime (order pairing used to swap them), and attention
layers of Linear query/key/value. Ground truth is each side's own record: module paths from the
exporter and the torch backend, shapes from what each runtime saw.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

torch = pytest.importorskip("torch")
# the exports here use the TorchScript exporter on purpose (node names follow the module paths)
pytestmark = pytest.mark.filterwarnings(
    "ignore:You are using the legacy TorchScript-based ONNX export:DeprecationWarning",
    "ignore:The feature will be removed:DeprecationWarning")

import layerperf  # noqa: E402
from layerperf.analysis.matching import Node, module_path, shapes_agree  # noqa: E402
from layerperf.cli import main  # noqa: E402

nn = torch.nn
RUNS = {"warmup": 1, "runs": 2}


# -- models ------------------------------------------------------------------------------------------
class ConvLayer(nn.Module):  # type: ignore[misc]
    def __init__(self, cin: int, cout: int, k: int, stride: int = 1, act: bool = True) -> None:
        super().__init__()
        self.convolution = nn.Conv2d(cin, cout, k, stride, k // 2, bias=False)
        self.normalization = nn.BatchNorm2d(cout)
        self.activation = nn.ReLU() if act else nn.Identity()

    def forward(self, x: Any) -> Any:
        return self.activation(self.normalization(self.convolution(x)))


class ShortCut(nn.Module):  # type: ignore[misc]
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.convolution = nn.Conv2d(cin, cout, 1, stride, bias=False)
        self.normalization = nn.BatchNorm2d(cout)

    def forward(self, x: Any) -> Any:
        return self.normalization(self.convolution(x))


class Bottleneck(nn.Module):  # type: ignore[misc]
    def __init__(self, cin: int, mid: int, cout: int, stride: int) -> None:
        super().__init__()
        self.shortcut = ShortCut(cin, cout, stride)
        self.layer = nn.Sequential(ConvLayer(cin, mid, 1), ConvLayer(mid, mid, 3, stride),
                                   ConvLayer(mid, cout, 1, act=False))
        self.activation = nn.ReLU()

    def forward(self, x: Any) -> Any:
        out = self.layer(x)  # the shortcut after the block, as Hugging Face's ResNet does
        return self.activation(out + self.shortcut(x))


class Stage(nn.Module):  # type: ignore[misc]
    def __init__(self, cin: int, mid: int, cout: int, stride: int) -> None:
        super().__init__()
        self.layers = nn.Sequential(Bottleneck(cin, mid, cout, stride), Bottleneck(cout, mid, cout, 1))

    def forward(self, x: Any) -> Any:
        for layer in self.layers:
            x = layer(x)
        return x


class Residual(nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.embedder = ConvLayer(3, 16, 3)
        self.stages = nn.ModuleList([Stage(16, 8, 32, 1), Stage(32, 16, 64, 2)])

    def forward(self, x: Any) -> Any:
        x = self.embedder(x)
        for stage in self.stages:
            x = stage(x)
        return x


class SelfAttention(nn.Module):  # type: ignore[misc]
    def __init__(self, d: int) -> None:
        super().__init__()
        self.query, self.key, self.value = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.scale = d ** -0.5

    def forward(self, x: Any) -> Any:
        scores = torch.matmul(self.query(x), self.key(x).transpose(-1, -2)) * self.scale
        return torch.matmul(scores.softmax(-1), self.value(x))


class DenseNorm(nn.Module):  # type: ignore[misc]
    def __init__(self, din: int, d: int) -> None:
        super().__init__()
        self.dense, self.LayerNorm = nn.Linear(din, d), nn.LayerNorm(d)

    def forward(self, x: Any, residual: Any) -> Any:
        return self.LayerNorm(self.dense(x) + residual)


class Attention(nn.Module):  # type: ignore[misc]
    def __init__(self, d: int) -> None:
        super().__init__()
        self.self, self.output = SelfAttention(d), DenseNorm(d, d)

    def forward(self, x: Any) -> Any:
        return self.output(self.self(x), x)


class Intermediate(nn.Module):  # type: ignore[misc]
    def __init__(self, d: int) -> None:
        super().__init__()
        self.dense, self.act = nn.Linear(d, 4 * d), nn.GELU()

    def forward(self, x: Any) -> Any:
        return self.act(self.dense(x))


class Layer(nn.Module):  # type: ignore[misc]
    def __init__(self, d: int) -> None:
        super().__init__()
        self.attention, self.intermediate, self.output = Attention(d), Intermediate(d), DenseNorm(4 * d, d)

    def forward(self, x: Any) -> Any:
        x = self.attention(x)
        return self.output(self.intermediate(x), x)


class Encoder(nn.Module):  # type: ignore[misc]
    def __init__(self, d: int = 32, n: int = 2) -> None:
        super().__init__()
        self.layer = nn.ModuleList([Layer(d) for _ in range(n)])

    def forward(self, x: Any) -> Any:
        for layer in self.layer:
            x = layer(x)
        return x


class BertLike(nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.encoder = Encoder()

    def forward(self, x: Any) -> Any:
        return self.encoder(x)


class Wrapper(nn.Module):  # type: ignore[misc]
    """What an export script wraps a model in: its nodes are named ``/model/...``."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: Any) -> Any:
        return self.model(x)


# -- profiles ----------------------------------------------------------------------------------------
def _profiles(tmp: Path, model: Any, x: Any, levels: tuple[str, ...]) -> dict[str, Path]:
    onnx_path = tmp / "model.onnx"
    torch.onnx.export(Wrapper(model), (x,), str(onnx_path), dynamo=False, opset_version=17,
                      input_names=["x"], output_names=["out"])
    out = {"torch": tmp / "torch", "torch2": tmp / "torch2"}
    layerperf.save(layerperf.profile((model, x), backend="torch", threads=1, **RUNS), out["torch"])  # type: ignore[arg-type]
    layerperf.save(layerperf.profile((model, x), backend="torch", threads=1, level=2, **RUNS),  # type: ignore[arg-type]
                   out["torch2"])
    for level in levels:
        out[level] = tmp / level
        layerperf.save(layerperf.profile(onnx_path, opt_level=level, threads=1, latency=False, **RUNS), out[level])
    return out


@pytest.fixture(scope="module")
def residual(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    torch.manual_seed(0)
    return _profiles(tmp_path_factory.mktemp("residual"), Residual().eval(), torch.randn(1, 3, 16, 16),
                     ("all",))


@pytest.fixture(scope="module")
def bert(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    torch.manual_seed(0)
    return _profiles(tmp_path_factory.mktemp("bert"), BertLike().eval(), torch.randn(1, 8, 32),
                     ("all", "disable"))


def _diff(capsys: pytest.CaptureFixture[str], a: Path, b: Path) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["diff", str(a), str(b), "--format", "json"]) == 0
    doc: dict[str, Any] = orjson.loads(capsys.readouterr().out)
    return doc


def _layers(path: Path) -> dict[str, Any]:
    return {la.name: la for la in layerperf.load(path).layers}


def _node(layer: Any) -> Node:
    return Node(layer.name, layer.op_type, (), layer.in_shapes, layer.out_shapes)


def _aligned(onnx_name: str) -> str:
    where = module_path(onnx_name)
    assert where is not None and where[1] and where[0].startswith("model."), onnx_name
    return where[0].removeprefix("model.")


# -- tests -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("torch_side", ["torch", "torch2"])
def test_residual_block_convs_pair_by_scope_with_agreeing_shapes(residual: dict[str, Path], torch_side: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    doc = _diff(capsys, residual["all"], residual[torch_side])
    ort, mods = _layers(residual["all"]), _layers(residual[torch_side])
    convs = [name for name, la in mods.items() if la.op_type == "Conv2d"]
    pairs = {r["key_b"]: r for r in doc["rows"] if r["match"]}
    assert sorted(k for k in pairs if mods[k].op_type == "Conv2d") == sorted(convs)  # every conv paired
    for name_b, row in pairs.items():
        path = _aligned(row["key"])
        # the node's own module, or (a conv ONNX Runtime named after the ReLU fused into it) its sibling
        assert path == name_b or path.rpartition(".")[0] == name_b.rpartition(".")[0], (row["key"], name_b)
        assert shapes_agree(_node(ort[row["key"]]), _node(mods[name_b])), (row["key"], name_b)
    for stage in (0, 1):
        short = f"stages.{stage}.layers.0.shortcut.convolution"
        assert _aligned(pairs[short]["key"]) == short
        last = f"stages.{stage}.layers.0.layer.2.convolution"
        assert _aligned(pairs[last]["key"]) == last
    assert doc["totals"]["matched_by"]["order"] == 0 and doc["totals"]["matched_by"]["scope"] == len(pairs)


@pytest.mark.parametrize("level", ["disable", "all"])
def test_attention_linears_pair_with_the_matmul_in_their_scope(bert: dict[str, Path], level: str,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    doc = _diff(capsys, bert[level], bert["torch"])
    mods = _layers(bert["torch"])
    linears = sorted(name for name, la in mods.items() if la.op_type == "Linear")
    assert len(linears) == 12  # q, k, v, attention output, intermediate, output: two layers
    pairs = {r["key_b"]: r for r in doc["rows"] if r["match"]}
    assert sorted(k for k in pairs if mods[k].op_type == "Linear") == linears
    for name in linears:
        row = pairs[name]
        assert row["match"] == "scope" and _aligned(row["key"]) == name, (row["key"], name)
        assert row["op_type"] in ("MatMul", "Gemm", "FusedMatMul", "FusedGemm")
    if level == "disable":  # each Linear is MatMul + Add: the Add, inside the module's scope, left unpaired
        only_a = [r["key"] for r in doc["rows"] if r["only_in"] == "A"]
        scoped = [_aligned(k) for k in only_a if k.startswith("/model/")]
        assert sum(path in linears for path in scoped) == 12
        inside = [path for path in scoped if any(path == m or path.startswith(m + ".") for m in pairs)]
        assert doc["totals"]["in_paired_scope_a"] == len(inside) >= 12
        capsys.readouterr()
        assert main(["diff", str(bert[level]), str(bert["torch"])]) == 0
        assert f"{len(inside)} only in A ran inside a module paired by scope" in capsys.readouterr().out


def test_level_2_aten_ops_pair_with_the_nodes_of_their_module(bert: dict[str, Path],
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    # level 2 adds a module's aten ops (``encoder.layer.0.attention.self/aten::matmul``): the attention's
    # own matmuls, inside no Linear, now have a partner in the same scope
    doc = _diff(capsys, bert["disable"], bert["torch2"])
    pairs = {r["key"]: r["key_b"] for r in doc["rows"] if r["match"]}
    for i in (0, 1):
        own = [(a, b) for a, b in pairs.items() if a.startswith(f"/model/encoder/layer.{i}/attention/self/MatMul")]
        assert sorted(b for _, b in own) == [f"encoder.layer.{i}.attention.self/aten::matmul",
                                             f"encoder.layer.{i}.attention.self/aten::matmul#1"], own
    for a, b in pairs.items():  # every pair in one module's scope
        where = module_path(b)
        assert where is not None and _aligned(a) == where[0], (a, b)
