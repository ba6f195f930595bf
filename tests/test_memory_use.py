"""The memory layerperf itself takes: weights read by ONNX Runtime alone, sessions made one at a time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import weakref
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.external_data_helper import load_external_data_for_model

import layerperf
from layerperf.backends.ort import OrtOptions
from layerperf.backends.ort import measure as backend
from layerperf.models.skeleton import INLINE_LIMIT_BYTES, read_skeleton
from layerperf.models.source import open_model

MIB = 1024 * 1024


def mlp(layers: int = 2, d: int = 1024, h: int = 2048) -> onnx.ModelProto:
    """MatMul -> Relu -> MatMul blocks: float32 weights of 16 MiB per block, which ONNX Runtime pre-packs."""
    rng = np.random.default_rng(0)
    nodes, inits, cur = [], [], "x"
    for i in range(layers):
        inits += [numpy_helper.from_array(rng.standard_normal((d, h)).astype(np.float32), f"w{i}a"),
                  numpy_helper.from_array(rng.standard_normal((h, d)).astype(np.float32), f"w{i}b")]
        out = "y" if i == layers - 1 else f"o{i}"
        nodes += [helper.make_node("MatMul", [cur, f"w{i}a"], [f"h{i}"], name=f"mm{i}a"),
                  helper.make_node("Relu", [f"h{i}"], [f"r{i}"], name=f"relu{i}"),
                  helper.make_node("MatMul", [f"r{i}", f"w{i}b"], [out], name=f"mm{i}b")]
        cur = out
    # A small initializer (stays inline) written the way onnx writes weights it took back from external
    # data: with an explicit data_location=DEFAULT after its raw_data.
    shape = numpy_helper.from_array(np.array([8, d], np.int64), "shape")
    shape.data_location = TensorProto.DEFAULT
    nodes.append(helper.make_node("Reshape", ["y", "shape"], ["z"], name="reshape"))
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, d])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [8, d])], [*inits, shape])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


@pytest.fixture(scope="module")
def mlp_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("mlp") / "mlp.onnx"
    onnx.save(mlp(), path)
    return path


def test_skeleton_leaves_large_weights_in_the_file_and_reads_back_exactly(mlp_path: Path) -> None:
    skeleton = read_skeleton(mlp_path)
    by_name = {t.name: t for t in skeleton.graph.initializer}
    assert by_name["shape"].data_location == TensorProto.DEFAULT and len(by_name["shape"].raw_data) == 16
    big = [t for name, t in by_name.items() if name != "shape"]
    assert big and all(t.data_location == TensorProto.EXTERNAL and not t.raw_data for t in big)
    assert all({e.key: e.value for e in t.external_data}["location"] == mlp_path.name for t in big)
    assert skeleton.ByteSize() < 4096  # the graph, not its 32 MiB of weights
    load_external_data_for_model(skeleton, str(mlp_path.parent))  # the recorded offsets are the real ones
    for t in skeleton.graph.initializer:
        t.ClearField("data_location")
    full = onnx.load(str(mlp_path))
    for t in full.graph.initializer:
        t.ClearField("data_location")
    assert skeleton.SerializeToString() == full.SerializeToString()


def test_skeleton_keeps_initializers_up_to_the_limit_inline(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    onnx.save(mlp(layers=1, d=8, h=INLINE_LIMIT_BYTES // 32), path)  # w0a: exactly the limit
    sizes = {t.name: len(t.raw_data) for t in read_skeleton(path).graph.initializer}
    assert sizes["w0a"] == INLINE_LIMIT_BYTES
    assert read_skeleton(path, inline_limit=INLINE_LIMIT_BYTES - 1).graph.initializer[0].raw_data == b""


def test_skeleton_of_what_is_not_protobuf_raises(tmp_path: Path) -> None:
    path = tmp_path / "junk.onnx"
    path.write_bytes(b"\x0f\xff\xff not a model")
    with pytest.raises(ValueError):
        read_skeleton(path)


def test_model_source_holds_the_graph_not_the_weights(mlp_path: Path) -> None:
    source = open_model(mlp_path)
    assert source.proto.ByteSize() < 4096
    # the .onnx is where the graph finds its weights, not a data file of the model's own
    assert source.data_dir == mlp_path.parent and source.data_files == ()
    assert "external_data" not in source.describe()


def test_optimized_graph_is_read_back_without_weights(mlp_path: Path) -> None:
    graph = backend.optimized_graph(open_model(mlp_path), OrtOptions())
    assert {n.name for n in graph.graph.node} >= {"mm0a", "mm1b"}
    assert graph.ByteSize() < 64 * 1024
    weights = {t.name: t for t in graph.graph.initializer if t.data_location == TensorProto.EXTERNAL}
    assert {"w0a", "w1b"} <= set(weights) and list(weights["w0a"].dims) == [1024, 2048]


def test_stepwise_reads_each_nodes_weights_from_external_data(tmp_path: Path) -> None:
    from layerperf.backends.ort.stepwise import StepwiseExecutor

    onnx.save(mlp(layers=1, d=256, h=512), tmp_path / "m.onnx", save_as_external_data=True,
              location="m.onnx.data", size_threshold=1024)
    graph = onnx.load(str(tmp_path / "m.onnx"), load_external_data=False)
    assert graph.ByteSize() < 4096
    feed = {"x": np.random.default_rng(1).standard_normal((8, 256)).astype(np.float32)}
    executor = StepwiseExecutor(graph, [n.name for n in graph.graph.node], data_dir=tmp_path)
    got = executor.run_pass(feed)[0]["z"].numpy()
    plain = ort.InferenceSession(mlp(layers=1, d=256, h=512).SerializeToString(), providers=["CPUExecutionProvider"])
    want = plain.run(None, feed)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


def _entry(so: Any, key: str) -> str | None:
    try:
        return str(so.get_session_config_entry(key))
    except (AttributeError, RuntimeError):  # no options, or no such entry
        return None


class _Sessions:
    """Every InferenceSession made, and which are still alive."""

    def __init__(self) -> None:
        self.live: set[int] = set()
        self.events: list[tuple[str, int, dict[str, Any]]] = []  # ("made" | "gone", id, what it was)
        self.max_live = 0

    def made(self, sess: Any, so: Any) -> None:
        key = id(sess)
        info = {"writes_graph": bool(so is not None and so.optimized_model_filepath),
                "prepacks": _entry(so, "session.disable_prepacking") != "1", "others_alive": len(self.live)}
        self.live.add(key)
        self.max_live = max(self.max_live, len(self.live))
        self.events.append(("made", key, info))
        weakref.finalize(sess, self.gone, key)

    def gone(self, key: int) -> None:
        self.live.discard(key)
        self.events.append(("gone", key, {}))


def test_sessions_are_released_and_the_graph_writer_never_runs(mlp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    sessions = _Sessions()
    real_init = ort.InferenceSession.__init__

    def tracked_init(self: Any, path_or_bytes: Any, sess_options: Any = None, *args: Any, **kwargs: Any) -> None:
        real_init(self, path_or_bytes, sess_options, *args, **kwargs)
        sessions.made(self, sess_options)

    # on the class itself: layerperf's sessions are a subclass of it, made before this test runs
    monkeypatch.setattr(ort.InferenceSession, "__init__", tracked_init)
    layerperf.profile(mlp_path, runs=2, warmup=1, memory=True, sample_rate=0)
    made = [(key, info) for kind, key, info in sessions.events if kind == "made"]
    assert len(made) >= 4  # inputs, optimized graph, profiled runs, plain runs, memory
    assert not sessions.live  # none outlives the profile
    # Plain and profiled sessions may run side by side; never more than that.
    assert sessions.max_live <= 2
    writers = [(key, info) for key, info in made if info["writes_graph"]]
    assert len(writers) == 1
    key, info = writers[0]
    # A session that writes its optimized model keeps its weights besides their pre-packed copies: it
    # must not pre-pack (it never runs), live alone, and be gone before the next session is made.
    assert not info["prepacks"] and info["others_alive"] == 0
    after = [(kind, k) for kind, k, _ in sessions.events[sessions.events.index(("made", key, info)) + 1:]]
    assert after[0] == ("gone", key)


_PEAK = textwrap.dedent("""
    import json, sys
    import numpy as np, onnx, onnxruntime as ort
    import layerperf

    def kib(key):
        for line in open("/proc/self/status"):
            if line.startswith(key + ":"):
                return int(line.split()[1])

    base = kib("VmRSS")
    if sys.argv[1] == "session":
        sess = ort.InferenceSession(sys.argv[2], providers=["CPUExecutionProvider"])
        sess.run(None, {"x": np.ones((8, 1024), np.float32)})
    else:
        layerperf.profile(sys.argv[2], runs=3, warmup=1)
    print(json.dumps((kib("VmHWM") - base) * 1024))
""")


def _peak_over_baseline(what: str, path: Path) -> int:
    proc = subprocess.run([sys.executable, "-c", _PEAK, what, str(path)], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.returncode == 0, proc.stderr
    return int(json.loads(proc.stdout.strip().splitlines()[-1]))


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmHWM from /proc")
def test_profiling_peaks_at_about_one_session(mlp_path: Path) -> None:
    """A whole profile (checker, input session, the plain and profiled sessions whose runs alternate,
    the optimized graph) peaks within a small multiple of what one ONNX Runtime session of the
    model takes: Python never holds the weights, and no more than those two sessions hold them at
    once. Measured on this model: one session 62 MiB over the baseline, a profile 189 MiB, and
    307 MiB before (the parsed model held throughout, the optimized model read back with its
    weights, the first profiled session keeping its unpacked weights)."""
    session = _peak_over_baseline("session", mlp_path)
    profile = _peak_over_baseline("profile", mlp_path)
    assert session > 32 * MIB  # it did load the weights
    assert profile < 3.5 * session + 16 * MIB, (profile / MIB, session / MIB)


def test_bench_node_reads_its_weights_from_inside_the_file(mlp_path: Path) -> None:
    from layerperf.bench.extract import extract_node

    (weight,) = extract_node(mlp_path, "mm0b").model.graph.initializer
    want = next(t for t in onnx.load(str(mlp_path)).graph.initializer if t.name == "w0b")
    assert weight.name == "w0b" and weight.raw_data == want.raw_data


def test_linked_model_named_model_onnx_is_never_written_through(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Where ONNX Runtime ignores the folder key, a session is made from a temporary folder of links to
    the data files: for a file keeping weights inside, a link to the .onnx itself, which may be
    called model.onnx like the file written there."""
    from layerperf.models import extdata

    path = tmp_path / "model.onnx"
    onnx.save(mlp(layers=1, d=256, h=512), path)
    before = path.read_bytes()
    source = open_model(path)
    monkeypatch.setattr(extdata, "folder_key_works", lambda: False)
    with extdata.session_model(source.proto, source.data_dir, ort.SessionOptions()) as what:
        written = Path(str(what))
        assert not written.is_symlink() and (written.parent / "model.onnx").is_symlink()
        assert onnx.load(str(written), load_external_data=False) == source.proto
    assert path.read_bytes() == before
