"""Per-node perf counters on ONNX Runtime, for real, with software events (no hardware PMU here)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import layerperf
from layerperf.counters import CounterSet

from conftest import run_cli

N = 384  # a 384^3 MatMul: ~0.11 GFLOP, a few ms: big enough to parallelize, small enough for CI
X_SHAPE = (N, 4 * N)  # mm1 does 4x mm2's work: the nodes' ranks stand clear of a noisy host's jitter


def matmul_chain(n: int = N) -> onnx.ModelProto:
    """x [n, 4n] -> MatMul -> Relu -> MatMul -> y [n, n]: two heavy nodes of unequal work around a light one."""
    rng = np.random.default_rng(0)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, 4 * n])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, n])
    inits = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), f"w{i}")
             for i, shape in ((1, (4 * n, n)), (2, (n, n)))]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["a"], name="mm1"),
             helper.make_node("Relu", ["a"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "w2"], ["y"], name="mm2")]
    model = helper.make_model(helper.make_graph(nodes, "chain", [x], [y], inits),
                              opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    return model


@pytest.fixture(scope="module")
def chain_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("m") / "chain.onnx"
    onnx.save(matmul_chain(), path)
    return path


@pytest.fixture(scope="module")
def counted(chain_path: Path) -> layerperf.Profile:
    return layerperf.profile(chain_path, warmup=1, runs=3, threads=1, opt_level="disable",
                             events=["task-clock", "page-faults"], passes=4)


def test_counts_per_node_and_pass(counted: layerperf.Profile) -> None:
    names = [layer.name for layer in counted.layers]
    assert names == ["mm1", "relu", "mm2"]
    for layer in counted.layers:
        assert set(layer.counters) == {"task-clock", "page-faults"}
        assert len(layer.counters["task-clock"]) == 4
    mm1, relu, _ = counted.layers
    # task-clock is CPU ns: a heavy MatMul takes far more of it than a Relu
    assert np.median(mm1.counters["task-clock"]) > 3 * np.median(relu.counters["task-clock"])
    section = counted.extra["counters"]
    assert section["events"] == {"task-clock": "task-clock", "page-faults": "page-faults"}
    assert section["schedule"] == [["task-clock", "page-faults"]]


def test_stepwise_fidelity_reported(counted: layerperf.Profile) -> None:
    from layerperf.analysis.summary import summary

    fid = summary(counted)["fidelity"]
    assert fid is not None
    assert 0.3 < fid["time_ratio"] < 3.0
    assert fid["rank_correlation"] is not None and fid["rank_correlation"] > 0


def test_counters_in_outputs_and_reload(counted: layerperf.Profile, tmp_path: Path) -> None:
    layerperf.save(counted, tmp_path)
    with (tmp_path / "layers.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert "task-clock" in rows[0] and "page-faults" in rows[0]
    assert float(rows[0]["task-clock"]) > 0
    doc = json.loads((tmp_path / "trace.json").read_text())
    tracks = [e for e in doc["traceEvents"] if e["ph"] == "C"]
    assert {e["name"] for e in tracks} == {"task-clock", "page-faults"}
    node_events = [e for e in doc["traceEvents"] if e.get("cat") == "layer"]
    assert all("task-clock" in e["args"] for e in node_events)
    assert layerperf.load(tmp_path) == counted


def test_task_clock_over_nodes_matches_whole_pass(chain_path: Path) -> None:
    # In process, per-session threads of 1: the calling thread does all the work.
    from layerperf.backends.ort.stepwise import StepwiseExecutor

    executor = StepwiseExecutor(matmul_chain(), ["mm1", "relu", "mm2"], threads=1)
    feed = {"x": np.ones(X_SHAPE, np.float32)}
    executor.run_pass(feed)
    with CounterSet(["task-clock"], threads="self") as cs:
        cs.enable()
        per_node: list[int] = []
        marks: list[object] = [None]

        def before(i: int) -> None:
            marks[0] = cs.read()

        def after(i: int) -> None:
            per_node.append((cs.read() - marks[0])["task-clock"])  # type: ignore[operator]

        start = cs.read()
        executor.run_pass(feed, before, after)
        whole = (cs.read() - start)["task-clock"]
    assert 0.8 * whole <= sum(per_node) <= whole


FAULTS_SCRIPT = """
import ctypes, json, numpy as np
from onnx import TensorProto, helper, numpy_helper
ctypes.CDLL(None, use_errno=True).prctl(41, 1, 0, 0, 0)  # PR_SET_THP_DISABLE: count 4 KiB pages
big = helper.make_node("ConstantOfShape", ["shape_big"], ["big"], name="big",
                       value=numpy_helper.from_array(np.array([1.0], np.float32)))
small = helper.make_node("ConstantOfShape", ["shape_small"], ["small"], name="small",
                         value=numpy_helper.from_array(np.array([1.0], np.float32)))
inits = [numpy_helper.from_array(np.array([1 << 24], np.int64), "shape_big"),
         numpy_helper.from_array(np.array([1 << 10], np.int64), "shape_small")]
graph = helper.make_graph([small, big], "faults", [],
                          [helper.make_tensor_value_info("big", TensorProto.FLOAT, [1 << 24]),
                           helper.make_tensor_value_info("small", TensorProto.FLOAT, [1 << 10])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
from layerperf.backends.ort.stepwise import StepwiseExecutor
from layerperf.counters import CounterSet
executor = StepwiseExecutor(model, ["small", "big"], threads=1)
faults = {}
with CounterSet(["page-faults"], threads="self") as cs:
    cs.enable()
    marks = [None]
    executor.run_pass({}, lambda i: marks.__setitem__(0, cs.read()),
                      lambda i: faults.__setitem__(i, (cs.read() - marks[0])["page-faults"]))
print(json.dumps(faults))
"""


def test_fresh_memory_shows_page_faults() -> None:
    # A node whose 64 MiB output is written into memory never touched before: on its first (cold)
    # pass its page faults dwarf those of a node writing 4 KiB. In a fresh process, with large
    # blocks always mapped anew (glibc's mmap threshold) and 4 KiB pages (THP off), so no memory
    # an earlier test freed can be reused.
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "131072"}
    proc = subprocess.run([sys.executable, "-c", FAULTS_SCRIPT], capture_output=True, text=True, timeout=120,
                          env=env)
    assert proc.returncode == 0, proc.stderr
    faults = {int(k): v for k, v in json.loads(proc.stdout.splitlines()[-1]).items()}
    assert faults[1] >= (64 << 20) // 4096 // 2  # at least half the pages of 64 MiB
    assert faults[1] > 20 * max(faults[0], 1)


WORKER_SCRIPT = """
import sys, numpy as np
import onnxruntime.capi._pybind_state as state
state.set_global_thread_pool_sizes(2, 1)  # as the counting worker does for --threads 2
sys.path.insert(0, sys.argv[1])
from test_counters_profile import matmul_chain, X_SHAPE
from layerperf.backends.ort.stepwise import StepwiseExecutor
from layerperf.counters import CounterSet
ex = StepwiseExecutor(matmul_chain(), ["mm1", "relu", "mm2"], global_threads=True)
feed = {"x": np.ones(X_SHAPE, np.float32)}
ex.run_pass(feed)
with CounterSet(["task-clock"], threads="all") as every, CounterSet(["task-clock"], threads="self") as me:
    every.enable(); me.enable()
    a0, m0 = every.read(), me.read()
    for _ in range(5):
        ex.run_pass(feed)
    print(len(every.threads), (every.read() - a0)["task-clock"], (me.read() - m0)["task-clock"])
"""


def test_worker_threads_are_counted() -> None:
    # The counting worker opens counters on every thread of its process: with a pool of 2 the
    # MatMuls run partly on the pool's worker thread, whose CPU time must be in the sums.
    proc = subprocess.run([sys.executable, "-c", WORKER_SCRIPT, str(Path(__file__).parent)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    threads, every, me = (int(x) for x in proc.stdout.split())
    assert threads >= 2
    assert every - me > 0.05 * every, (every, me)  # the worker did a real share of the work


def test_threads_option_reaches_counting_worker(chain_path: Path) -> None:
    prof = layerperf.profile(chain_path, warmup=0, runs=1, threads=2, opt_level="disable",
                             events=["task-clock"], passes=2, latency=False)
    # the MatMuls' CPU time above an empty boundary's (the Relu may not be, on a host another process shares)
    matmuls = [layer for layer in prof.layers if layer.op_type == "MatMul"]
    assert len(matmuls) == 2 and all(np.median(layer.counters["task-clock"]) > 0 for layer in matmuls)
    assert all(np.median(layer.counters["task-clock"]) >= 0 for layer in prof.layers)
    assert prof.metadata.plan.threads == 2


def test_multiplex_reports_fraction_counted(chain_path: Path) -> None:
    prof = layerperf.profile(chain_path, warmup=0, runs=1, threads=1, opt_level="disable",
                             events=["task-clock", "cpu-clock"], passes=2, multiplex=True, latency=False)
    fractions = prof.extra["counters"]["fraction_counted"]
    assert set(fractions) == {"task-clock", "cpu-clock"}
    assert all(0.0 < f <= 1.0 for f in fractions["task-clock"])
    row = prof.table()[0]
    assert "task-clock_counted" in row


def test_perf_config_labels(chain_path: Path, tmp_path: Path) -> None:
    config = tmp_path / "perf.json"
    config.write_text(json.dumps({"perf::PERF_COUNT_SW_TASK_CLOCK": "cpu_ns", "page-faults": "faults"}))
    prof = layerperf.profile(chain_path, warmup=0, runs=1, threads=1, perf_config=config, passes=2,
                             latency=False)
    assert set(prof.layers[0].counters) == {"cpu_ns", "faults"}


def test_no_pmu_error_is_real(chain_path: Path, tmp_path: Path) -> None:
    probe = subprocess.run(["perf", "stat", "-e", "cycles", "true"], capture_output=True, text=True) \
        if Path("/usr/bin/perf").exists() else None
    try:
        with CounterSet(["cycles"], threads="self") as cs:
            cs.enable()
        pytest.skip("this machine exposes a hardware PMU")
    except layerperf.errors.CounterError:  # type: ignore[attr-defined]
        pass
    del probe
    out = tmp_path / "out"
    proc = run_cli("profile", str(chain_path), "--runs", "1", "--events", "cycles", "--out", str(out))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert "cycles" in proc.stderr and "PMU" in proc.stderr
    assert not out.exists()


def test_unknown_event_suggests(chain_path: Path) -> None:
    proc = run_cli("profile", str(chain_path), "--runs", "1", "--events", "page-fault")
    assert proc.returncode == 2 and "page-faults" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("text,message", [("", "no event named"), (" , ", "no event named"),
                                          ("task-clock,,page-faults", "an empty event name"),
                                          ("task-clock page-faults", "separate events by commas")])
def test_an_events_list_that_names_no_event_is_refused(text: str, message: str) -> None:
    import argparse

    from layerperf.cli.common import event_list

    with pytest.raises(argparse.ArgumentTypeError, match=message):
        event_list(text)
    assert event_list(" task-clock, page-faults ") == ("task-clock", "page-faults")  # a label has no space


def test_an_empty_events_list_writes_nothing(chain_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_cli("profile", str(chain_path), "--runs", "1", "--events", ",", "--out", str(out))
    assert proc.returncode == 2 and "no event named" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.parametrize("labels,message", [
    ({"task-clock": "median_us"}, "'median_us' is a column of the layer table"),
    ({"task-clock": "name"}, "'name' is a column"),
    ({"task-clock": "stepwise_ratio"}, "'stepwise_ratio' is a column"),
    ({"task-clock": "ipc"}, "'ipc' is a column"),
    ({"task-clock": "pct_of_peak"}, "'pct_of_peak' is a column"),
    ({"task-clock": "tc", "page-faults": "tc_cv"}, "'tc_cv' is the name of the cv column of label 'tc'"),
    ({"page-faults": "pf_insitu", "task-clock": "pf"}, "'pf_insitu' is the name of the insitu column"),
])
def test_a_label_that_would_overwrite_a_column_is_refused(tmp_path: Path, labels: dict[str, str],
                                                          message: str) -> None:
    from layerperf.collectors.perf import CounterRequest

    config = tmp_path / "perf.json"
    config.write_text(json.dumps(labels))
    with pytest.raises(layerperf.errors.CounterError, match=message):  # type: ignore[attr-defined]
        CounterRequest.build(None, config)
    with pytest.raises(layerperf.errors.CounterError, match="an empty event name"):  # type: ignore[attr-defined]
        CounterRequest.build(["task-clock", " "], None)
    with pytest.raises(layerperf.errors.CounterError, match="not an event name: separate events by commas"):  # type: ignore[attr-defined]
        CounterRequest.build(["task-clock page-faults"], None)  # the API's words are --events' words
    request = CounterRequest.build([" page-faults", "task-clock"], None)  # the API's names are trimmed too
    assert request is not None and request.labels == ("page-faults", "task-clock")
    from layerperf.collectors import Collectors

    made = Collectors.make(events="task-clock, page-faults", passes=1)  # a string: names, not its letters
    assert made.counters is not None and made.counters.labels == ("task-clock", "page-faults")
    from layerperf.bench.api import settings_from

    assert settings_from(events="task-clock,page-faults").events == ("task-clock", "page-faults")


def test_bad_perf_config(chain_path: Path, tmp_path: Path) -> None:
    config = tmp_path / "perf.json"
    config.write_text("{not json")
    proc = run_cli("profile", str(chain_path), "--runs", "1", "--perf-config", str(config))
    assert proc.returncode == 2 and str(config) in proc.stderr and "Traceback" not in proc.stderr


def test_events_command() -> None:
    proc = run_cli("events", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    by_name = {e["name"]: e for e in doc["events"]}
    assert by_name["task-clock"]["ok"] is True
    assert "cycles" in by_name


def test_drop_in_session_writes_counters(chain_path: Path, tmp_path: Path) -> None:
    import layerperf.onnxruntime as lort

    config = tmp_path / "perf.json"
    config.write_text(json.dumps({"task-clock": "cpu_ns"}))
    so = ort.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = str(tmp_path / "prof")
    so.add_session_config_entry("session.profiler.perf_config_file_name", str(config))
    sess = lort.InferenceSession(str(chain_path), so, providers=["CPUExecutionProvider"])
    out = sess.run(None, {"x": np.ones(X_SHAPE, np.float32)})
    assert out[0].shape == (N, N)
    events = json.loads(Path(sess.end_profiling()).read_text())
    nodes = [e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    assert nodes and all(e["args"]["cpu_ns"] >= 0 for e in nodes)
    assert max(e["args"]["cpu_ns"] for e in nodes) > 0
    # layerperf analyze reads the counters back, per node
    proc = run_cli("analyze", str(_latest_profile(tmp_path)), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    written = {e["name"][: -len("_kernel_time")]: e["args"]["cpu_ns"] for e in nodes}
    assert set(rows) == set(written)
    for name, value in written.items():
        assert rows[name]["cpu_ns"] == pytest.approx(value * rows[name]["calls"])  # summed over calls


def _latest_profile(folder: Path) -> Path:
    return max(folder.glob("prof*.json"), key=lambda p: p.stat().st_mtime)


def test_worker_error_is_clean(tmp_path: Path) -> None:
    # The counting worker turns a layerperf error into a clean error in the parent.
    script = textwrap.dedent("""
        from pathlib import Path
        import numpy as np
        from layerperf.backends.ort.counting import count_layers
        from layerperf.collectors.perf import CounterRequest
        req = CounterRequest(("task-clock",), ("task-clock",), 1, False)
        try:
            count_layers(Path("/nonexistent.onnx"), {"opt_level": "all", "provider": "CPUExecutionProvider",
                         "threads": 1}, {}, ["a"], req)
        except Exception as exc:
            print(type(exc).__name__)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() in {"LayerperfError", "InputError", "BackendError"}, proc.stdout + proc.stderr
