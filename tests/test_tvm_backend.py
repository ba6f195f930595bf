"""``--backend tvm`` end to end: a Profile like the other backends' (layers named after their ONNX
nodes, fused kernels listing the nodes they cover, shapes, FLOPs, bytes, the schedule of each kernel
in trace.json and in the per-layer records), level 2's builtin rows, the VM's memory in the memory
report, the build cached, and its refusals in one line (exit 2, nothing written)."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

pytest.importorskip("tvm")
os.environ.setdefault("TVM_NUM_THREADS", "1")

import onnx  # noqa: E402

import layerperf  # noqa: E402
from layerperf.cli import main  # noqa: E402
from layerperf.data.extension import TvmKernel  # noqa: E402
from tvm_models import conv_chain, det_model, own_cache, save  # noqa: E402,F401


@pytest.fixture(scope="module")
def model_path(tiny_model_path: Path) -> Path:
    return tiny_model_path  # conftest's tiny_cnn: Conv -> Relu -> MaxPool -> Flatten -> Gemm


@pytest.fixture(scope="module")
def level1(model_path: Path) -> layerperf.Profile:
    return layerperf.profile(model_path, backend="tvm", runs=3, warmup=1, memory=True)


@pytest.fixture(scope="module")
def level2(model_path: Path) -> layerperf.Profile:
    return layerperf.profile(model_path, backend="tvm", runs=2, warmup=0, level=2, latency=False)


def test_kernels_are_named_after_their_nodes(level1: layerperf.Profile) -> None:
    names = [layer.name for layer in level1.layers]
    assert "conv+relu" in names and "fc" in names  # the conv fused with its relu; the Gemm alone
    fused = next(layer for layer in level1.layers if layer.name == "conv+relu")
    ext = fused.extension
    assert isinstance(ext, TvmKernel) and ext.nodes == ("conv", "relu") and ext.anchor == "conv"
    assert ext.function.startswith("fused_") and ext.schedule is not None and ext.schedule.source == "default schedule"
    assert fused.op_type == "Conv" and fused.provider == "llvm"
    assert [t.name for t in fused.inputs] == ["input", "conv.w", "conv.b"] and fused.outputs[0].name == "r"
    assert fused.outputs[0].shape == (1, 8, 16, 16) and fused.param_bytes == (8 * 3 * 3 * 3 + 8) * 4
    assert fused.flops == 2 * 8 * 16 * 16 * 3 * 3 * 3 + 8 * 16 * 16 * 2  # conv MACs, its bias and the relu
    assert fused.bytes_read is not None and fused.bytes_written == 8 * 16 * 16 * 4


CONV_RELU = 2 * 16 * 3 * 9 * 32 * 32 + 2 * 16 * 32 * 32  # conv MACs, its bias and the relu: 917,504
CONV2_RELU2 = 2 * 16 * 16 * 9 * 32 * 32 + 16 * 32 * 32  # no bias: 4,734,976


@pytest.mark.parametrize(("ops", "want"), [
    (["Conv", "Relu"], [("conv+relu", "Conv", CONV_RELU, ("conv", "relu")),
                        ("conv2+relu2", "Conv", CONV2_RELU2, ("conv2", "relu2"))]),
    (["Sigmoid"], [("conv+relu+sigmoid", "Conv", CONV_RELU + 16 * 32 * 32, ("conv", "relu", "sigmoid"))]),
], ids=["conv-relu-conv-relu", "conv-relu-sigmoid"])
def test_a_fused_group_ending_at_the_graphs_output_keeps_all_its_nodes(
        ops: list[str], want: list[tuple[str, str, int, tuple[str, ...]]], tmp_path: Path) -> None:
    # The last group's call is bound to main's output var, which aliased only the group's last node.
    prof = layerperf.profile(save(conv_chain(*ops), tmp_path, "chain"), backend="tvm", runs=1, warmup=0,
                             latency=False)
    got = [(layer.name, layer.op_type, layer.flops, layer.extension.nodes) for layer in prof.layers
           if isinstance(layer.extension, TvmKernel)]
    assert got == want
    assert prof.layers[-1].extension.function.startswith("fused_conv2d")


def test_metadata_says_target_pipeline_and_tuning_state(level1: layerperf.Profile) -> None:
    meta = level1.metadata
    assert meta.backend == "tvm" and meta.provider == "llvm"
    options = meta.options.as_dict()
    assert orjson.loads(options["target"])["kind"] == "llvm" and options["target_given"] == "llvm"
    assert options["pipeline"] == "default" and options["tuning_state"] == "untuned" and options["tune"] == 0
    assert options["compile_s"] > 0 and any("untuned TVM build" in w for w in level1.warnings)
    rec = next(r for r in level1.records() if r.name == "conv+relu")
    assert rec.schedule == "default schedule" and rec.tuning_state == "untuned" and rec.target == options["target"]


def test_the_memory_report_has_the_vms_allocations(level1: layerperf.Profile) -> None:
    rep = level1.memory
    assert rep is not None and rep.allocations is not None and "tvm relax vm" in rep.allocations.source
    assert rep.allocations.allocated_bytes >= 8 * 16 * 16 * 4  # the conv's output block at least
    assert rep.peak_node in {layer.name for layer in level1.layers}


def test_level_2_adds_the_vms_builtins_as_rows(level2: layerperf.Profile, level1: layerperf.Profile) -> None:
    builtins = [layer for layer in level2.layers if layer.domain == "tvm.vm"]
    assert builtins and len(level2.layers) == len(level1.layers) + len(builtins)
    assert {layer.op_type for layer in builtins} >= {"alloc_storage", "alloc_tensor", "check_tensor_info"}
    assert all(layer.flops == 0 for layer in builtins)
    assert any(layer.name == "conv+relu/alloc_tensor" for layer in builtins)
    assert len({layer.name for layer in level2.layers}) == len(level2.layers)


def test_trace_json_keeps_each_kernels_nodes_and_schedule(level1: layerperf.Profile, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    layerperf.save(level1, tmp_path)
    saved = orjson.loads((tmp_path / "trace.json").read_bytes())["otherData"]["layerperf"]["layers"]
    fused = next(layer for layer in saved if layer["name"] == "conv+relu")
    assert fused["tvm"]["nodes"] == ["conv", "relu"] and fused["tvm"]["schedule"]["source"] == "default schedule"
    assert layerperf.load(tmp_path) == level1
    assert main(["analyze", str(tmp_path / "trace.json"), "--format", "json"]) == 0
    assert {r["name"] for r in orjson.loads(capsys.readouterr().out)} == {layer.name for layer in level1.layers}


def test_a_second_profile_loads_the_build(model_path: Path) -> None:
    again = layerperf.profile(model_path, backend="tvm", runs=1, warmup=0, latency=False)
    assert again.metadata.options.get("build_cached") is True


def test_profile_command_writes_the_files(model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["profile", str(model_path), "--backend", "tvm", "--runs", "2", "--warmup", "0", "--level", "2",
                 "--pipeline", "unfused", "--format", "json", "--out", str(out)]) == 0
    doc = orjson.loads(capsys.readouterr().out)
    assert {"conv", "relu", "pool", "fc"} <= {row["name"] for row in doc["layers"]}  # unfused: one per node
    assert (out / "trace.json").is_file() and (out / "layers.csv").is_file()


@pytest.mark.parametrize(("args", "words"), [
    (["--target", "llvm -mtriple=aarch64-linux-gnu"], "not available here"),
    (["--target", "cuda"], "not available here"),
    (["--compare"], "give --tune TRIALS too"),
    (["--level", "3"], "--level must be 1 (kernels) or 2"),
    (["--opt-level", "all"], "--opt-level is an option of the onnxruntime backend"),
])
def test_bad_options_are_one_line(model_path: Path, tmp_path: Path, args: list[str], words: str,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["profile", str(model_path), "--backend", "tvm", "--runs", "1", "--out", str(out), *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err and "Traceback" not in err
    assert not out.exists()


def test_an_op_tvm_cannot_import_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "det.onnx"
    onnx.save(det_model(), path)
    out = tmp_path / "out"
    assert main(["profile", str(path), "--backend", "tvm", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Det (node 'the_det')" in err and "--backend onnxruntime" in err
    assert not out.exists()


def test_without_tvm_the_backend_says_how_to_install_it(model_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    import importlib

    from layerperf.backends.tvm import runtime

    real = importlib.import_module

    def no_tvm(name: str, *args: object) -> object:
        if name == "tvm":
            raise ImportError("No module named 'tvm'")
        return real(name, *args)

    monkeypatch.setattr(runtime.importlib, "import_module", no_tvm)
    assert main(["profile", str(model_path), "--backend", "tvm"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'layerperf[tvm]'" in err
