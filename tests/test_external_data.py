"""Models whose weights live in external data files, run from a working directory elsewhere."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import layerperf
from layerperf.data.metadata import DataFile
from layerperf.errors import InputError
from layerperf.models.source import open_model

from conftest import run_cli, tiny_cnn

DATA = "tiny.onnx.data"
FEED = {"input": np.random.default_rng(1).standard_normal((1, 3, 16, 16)).astype(np.float32)}


@pytest.fixture(scope="module")
def ext_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tiny_cnn with every weight in one external data file beside it."""
    path = tmp_path_factory.mktemp("ext") / "tiny.onnx"
    onnx.save(tiny_cnn(), path, save_as_external_data=True, all_tensors_to_one_file=True, location=DATA,
              size_threshold=0)
    model = onnx.load(path, load_external_data=False)
    assert all(i.data_location == TensorProto.EXTERNAL for i in model.graph.initializer)
    return path


@pytest.fixture()
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory that holds neither the model nor its data."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return cwd


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- every command, from another working directory --------------------------------------------------

def test_profile_from_elsewhere(ext_path: Path, elsewhere: Path) -> None:
    out = elsewhere / "out"
    proc = run_cli("profile", str(ext_path), "--runs", "2", "--warmup", "0", "--out", str(out), cwd=elsewhere)
    assert proc.returncode == 0, proc.stderr
    prof = layerperf.load(out)
    model = prof.metadata.model
    assert model.sha256 == _sha256(ext_path)  # the .onnx file itself, as sha256sum says
    data = ext_path.parent / DATA
    assert model.external_data == (DataFile(DATA, data.stat().st_size, _sha256(data)),)
    # the weights' sizes come from the graph's dims, without reading them
    fc = next(layer for layer in prof.layers if any(t.name == "fc.w" for t in layer.inputs))
    assert fc.param_bytes >= 10 * 8 * 8 * 8 * 4


def test_memory_from_elsewhere(ext_path: Path, elsewhere: Path) -> None:
    out = elsewhere / "mem"
    proc = run_cli("memory", str(ext_path), "--runs", "1", "--warmup", "0", "--out", str(out), cwd=elsewhere)
    assert proc.returncode == 0, proc.stderr
    assert {p.name for p in out.iterdir()} >= {"trace.json", "layers.csv", "memory_flow.svg"}


def test_events_from_elsewhere(ext_path: Path, elsewhere: Path) -> None:
    prof = layerperf.profile(str(ext_path), runs=1, warmup=0, latency=False,
                             events=["task-clock"], passes=1)
    assert prof.layers
    assert all(len(layer.counters["task-clock"]) == 1 for layer in prof.layers)
    assert sum(layer.counters["task-clock"][0] for layer in prof.layers) > 0


def test_events_cli_relative_path(ext_path: Path, tmp_path: Path) -> None:
    # a relative MODEL path, with the counting worker in its own process
    rel = os.path.relpath(ext_path, tmp_path)
    proc = run_cli("profile", rel, "--runs", "1", "--warmup", "0", "--events", "task-clock", "--passes", "1",
                   "--format", "json", "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    layers = json.loads(proc.stdout)["layers"]
    assert layers and all("task-clock" in row for row in layers)


def test_bench_node_from_elsewhere(ext_path: Path, elsewhere: Path) -> None:
    proc = run_cli("bench", str(ext_path), "--node", "fc", "--samples", "3", "--speed-wait", "0",
                   "--no-overhead", "--format", "json", cwd=elsewhere)
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)
    row = row[0] if isinstance(row, list) else row
    assert row["op_type"] == "Gemm" and row["out_shapes"] == "1x10"


@pytest.mark.parametrize("opt_level", ["disable", "all"])
def test_extracted_node_has_the_real_weights(ext_path: Path, elsewhere: Path, opt_level: str) -> None:
    from layerperf.backends import single_op
    from layerperf.backends.ort import OrtOptions
    from layerperf.bench.extract import extract_node

    inline = elsewhere / "inline.onnx"
    onnx.save(tiny_cnn(), inline)
    graph = single_op("onnxruntime").node_graph(open_model(ext_path), {}, OrtOptions(opt_level=opt_level)).model.graph
    last = next(n for n in graph.node if "logits" in n.output)  # graph outputs keep their names
    one = extract_node(ext_path, last.name, opt_level=opt_level)
    ref = extract_node(inline, last.name, opt_level=opt_level)  # the same node, weights inside the model
    assert one.weights and one.weights == ref.weights
    assert all(i.data_location == TensorProto.DEFAULT for i in one.model.graph.initializer)
    weights = {i.name: numpy_helper.to_array(i) for i in one.model.graph.initializer}
    for i in ref.model.graph.initializer:
        np.testing.assert_array_equal(weights[i.name], numpy_helper.to_array(i))
    got = ort.InferenceSession(one.model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, one.feed)
    np.testing.assert_allclose(got[0], _model_output_of(ref))


def _model_output_of(one: Any) -> np.ndarray:
    sess = ort.InferenceSession(one.model.SerializeToString(), providers=["CPUExecutionProvider"])
    return np.asarray(sess.run(None, one.feed)[0])


def test_drop_in_session_from_elsewhere(ext_path: Path, elsewhere: Path) -> None:
    import layerperf.onnxruntime as lort

    config = elsewhere / "perf.json"
    config.write_text(json.dumps({"task-clock": "cpu_ns"}))
    for source, folder in ((str(ext_path), None), (ext_path.read_bytes(), ext_path.parent)):
        so = ort.SessionOptions()
        so.enable_profiling = True
        so.profile_file_prefix = str(elsewhere / "prof")
        so.add_session_config_entry("session.profiler.perf_config_file_name", str(config))
        if folder is not None:  # a model given as bytes: ONNX Runtime's way to say where its data is
            so.add_session_config_entry("session.model_external_initializers_file_folder_path", str(folder))
        sess = lort.InferenceSession(source, so, providers=["CPUExecutionProvider"], passes=1)
        sess.run(None, FEED)
        events = json.loads(Path(sess.end_profiling()).read_text())
        nodes = [e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
        assert nodes and all("cpu_ns" in e["args"] for e in nodes), type(source)


def test_in_memory_proto(ext_path: Path, elsewhere: Path) -> None:
    loaded = onnx.load(ext_path)  # external data read in: an ordinary in-memory model
    prof = layerperf.profile(loaded, runs=1, warmup=0, latency=False)
    assert prof.layers
    with pytest.raises(InputError, match="external data that was not loaded"):
        layerperf.profile(onnx.load(ext_path, load_external_data=False), runs=1, warmup=0)


def test_in_memory_proto_over_2gb(monkeypatch: pytest.MonkeyPatch) -> None:
    from layerperf.models import source as modelsrc

    # protobuf cannot serialize a message over 2 GB: say so instead of failing inside it
    monkeypatch.setattr(modelsrc, "MAX_PROTO_BYTES", tiny_cnn().ByteSize() - 1)
    with pytest.raises(InputError, match="over 2 GB"):
        open_model(tiny_cnn())


# -- data outside the model's directory, or damaged: one line, exit 2 -------------------------------

def _model_with_location(folder: Path, location: str, length: int = 16 * 4) -> Path:
    w = numpy_helper.from_array(np.arange(16, dtype=np.float32), "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", str(length))):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [16])
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"], name="add")], "g", [x], [y], [w])
    path = folder / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return path


@pytest.fixture()
def layout(tmp_path: Path) -> Path:
    """model/ (the model's directory) and outside/w.bin, a real data file next to it."""
    (tmp_path / "model").mkdir()
    (tmp_path / "outside").mkdir()
    np.arange(16, dtype=np.float32).tofile(tmp_path / "outside" / "w.bin")
    return tmp_path


def _assert_refused(path: Path, tmp_path: Path, *words: str) -> None:
    out = tmp_path / "out"
    proc = run_cli("profile", str(path), "--runs", "1", "--warmup", "0", "--out", str(out), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for word in words:
        assert word in lines[0], lines[0]
    assert not out.exists()


def test_dotdot_location_refused(layout: Path) -> None:
    path = _model_with_location(layout / "model", "../outside/w.bin")
    _assert_refused(path, layout, "outside the model's directory", "../outside/w.bin")


def test_absolute_location_refused(layout: Path) -> None:
    path = _model_with_location(layout / "model", str(layout / "outside" / "w.bin"))
    _assert_refused(path, layout, "outside the model's directory", "absolute path")


def test_symlink_out_refused(layout: Path) -> None:
    (layout / "model" / "w.bin").symlink_to(layout / "outside" / "w.bin")
    path = _model_with_location(layout / "model", "w.bin")
    _assert_refused(path, layout, "outside the model's directory", "symbolic link")


def test_missing_data_refused(layout: Path) -> None:
    path = _model_with_location(layout / "model", "nope.bin")
    _assert_refused(path, layout, "nope.bin", "missing")


def test_short_data_refused(layout: Path) -> None:
    np.arange(8, dtype=np.float32).tofile(layout / "model" / "w.bin")  # 32 bytes, the tensor reads 64
    path = _model_with_location(layout / "model", "w.bin")
    _assert_refused(path, layout, "w.bin", "truncated")


def test_inside_location_accepted(layout: Path) -> None:
    np.arange(16, dtype=np.float32).tofile(layout / "model" / "w.bin")
    source = open_model(_model_with_location(layout / "model", "w.bin"))
    assert [f.location for f in source.data_files] == ["w.bin"]
    assert source.data_dir == layout / "model"
