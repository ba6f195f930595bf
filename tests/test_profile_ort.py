"""Profiling on ONNX Runtime: in-situ timings, aggregates, trace.json and layers.csv, reload."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

import layerperf
from layerperf.backends.ort.measure import OPT_LEVELS
from layerperf.readers.ort import is_kernel_event, node_name

RUNS = 7


@pytest.fixture(scope="module")
def prof(tiny_model_path: Path) -> layerperf.Profile:
    return layerperf.profile(tiny_model_path, warmup=2, runs=RUNS)


def ort_own_node_names(path: Path, opt_level: str) -> set[str]:
    """Node names in ONNX Runtime's own profile of the same model, taken independently."""
    so = ort.SessionOptions()
    so.enable_profiling = True
    so.graph_optimization_level = OPT_LEVELS[opt_level]
    so.log_severity_level = 3
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    sess.run(None, {"input": np.zeros((1, 3, 16, 16), np.float32)})
    trace = Path(sess.end_profiling())
    events = json.loads(trace.read_text())
    trace.unlink()
    return {node_name(e["name"]) for e in events if is_kernel_event(e)}


@pytest.mark.parametrize("opt_level", ["disable", "all"])
def test_every_node_of_ort_profile_is_reported(tiny_model_path: Path, opt_level: str) -> None:
    prof = layerperf.profile(tiny_model_path, warmup=1, runs=2, opt_level=opt_level, latency=False)
    names = {layer.name for layer in prof.layers}
    assert ort_own_node_names(tiny_model_path, opt_level) == names
    if opt_level == "disable":
        assert [layer.name for layer in prof.layers] == ["conv", "relu", "pool", "flatten", "fc"]


def test_aggregates(prof: layerperf.Profile) -> None:
    rows = prof.table()
    assert len(prof.runs) == RUNS
    for row in rows:
        assert row["calls"] == RUNS
        assert 0 < row["min_us"] <= row["median_us"] <= row["p90_us"] <= row["max_us"]
        assert row["min_us"] <= row["mean_us"] <= row["max_us"]
    assert sum(r["share"] for r in rows) == pytest.approx(1.0)
    assert max(r["cum_share"] for r in rows) == pytest.approx(1.0)
    # the largest layer's cumulative share equals its own share
    top = max(rows, key=lambda r: r["share"])
    assert top["cum_share"] == pytest.approx(top["share"])


def test_operator_info_and_cost(prof: layerperf.Profile) -> None:
    by_type = {layer.op_type: layer for layer in prof.layers}
    gemm = next(layer for layer in prof.layers if "Gemm" in layer.op_type)
    assert gemm.provider == "CPUExecutionProvider"
    assert [t.shape for t in gemm.inputs] == [(1, 512), (10, 512), (10,)]
    assert gemm.outputs[0].shape == (1, 10)
    assert gemm.param_bytes == (10 * 512 + 10) * 4
    assert gemm.flops is not None and gemm.flops >= 2 * 512 * 10
    assert any(layer.flops is not None for layer in by_type.values())
    assert all(layer.bytes_read is not None and layer.bytes_read > 0 for layer in prof.layers)


def test_latency_and_overhead(prof: layerperf.Profile) -> None:
    from layerperf.analysis.summary import summary

    assert len(prof.latency_ns) == RUNS
    s = summary(prof)
    assert s["latency_median_us"] > 0 and s["profiled_median_us"] > 0
    assert s["profiler_overhead"] == pytest.approx(s["profiled_median_us"] / s["latency_median_us"])


def test_runs_are_timelines(prof: layerperf.Profile) -> None:
    starts = [run.start_ns for run in prof.runs]
    assert starts == sorted(starts)
    for run in prof.runs:
        for span in run.spans:
            assert run.start_ns <= span.start_ns <= run.start_ns + run.dur_ns
            assert span.dur_ns >= 0


def test_trace_json_structure(prof: layerperf.Profile, tmp_path: Path) -> None:
    files = layerperf.save(prof, tmp_path)
    doc = json.loads(files["trace.json"].read_text())
    events = doc["traceEvents"]
    xs = [e for e in events if e["ph"] == "X"]
    for e in xs:
        assert {"name", "ts", "dur", "pid", "tid", "ph"} <= set(e)
    layer_events = [e for e in xs if e.get("cat") == "layer"]
    assert len(layer_events) == RUNS * len(prof.layers)
    assert {"op_type", "provider", "in_shapes", "out_shapes", "flops", "bytes"} <= set(layer_events[0]["args"])
    meta = {e["name"] for e in events if e["ph"] == "M"}
    assert {"process_name", "thread_name"} <= meta
    other = doc["otherData"]
    assert other["layerperf_format"] == 1
    assert other["layerperf"]["metadata"]["backend"] == "onnxruntime"
    assert len(other["layerperf"]["aggregates"]) == len(prof.layers)


def test_reload_round_trip(prof: layerperf.Profile, tmp_path: Path) -> None:
    layerperf.save(prof, tmp_path)
    again = layerperf.load(tmp_path / "trace.json")
    assert again == prof
    assert layerperf.load(tmp_path) == prof
    assert again.table() == prof.table()


def test_layers_csv(prof: layerperf.Profile, tmp_path: Path) -> None:
    layerperf.save(prof, tmp_path)
    with (tmp_path / "layers.csv").open() as f:
        rows = list(csv.DictReader(f))
    required = ["name", "op_type", "provider", "calls", "median_us", "mean_us", "p90_us", "share", "flops",
                "bytes", "flops_per_s", "bytes_per_s", "in_shapes", "out_shapes"]
    assert set(required) <= set(rows[0])
    assert [r["name"] for r in rows] == [layer.name for layer in prof.layers]
    assert all(int(r["calls"]) == RUNS for r in rows)
    # unknown figures are empty cells, never "0"
    for r, layer in zip(rows, prof.layers, strict=True):
        assert (r["flops"] == "") == (layer.flops is None)


def test_event_limit_splits_sessions_without_losing_runs(tiny_model_path: Path) -> None:
    # A limit of 60 events fits only a few runs of this graph per session: the runs must be
    # spread over several sessions and every one of them kept.
    prof = layerperf.profile(tiny_model_path, warmup=1, runs=25, max_events=160, latency=False)
    assert len(prof.runs) == 25
    assert all(len(run.spans) == len(prof.layers) for run in prof.runs)
    assert len(prof.extra["profiled_latency_ns"]) == 25


def test_threads_option_recorded(tiny_model_path: Path) -> None:
    prof = layerperf.profile(tiny_model_path, warmup=0, runs=1, threads=2, latency=False)
    assert prof.metadata.plan.threads == 2
    assert prof.metadata.machine is not None and (prof.metadata.machine.cores or 0) >= 1


def test_dynamic_batch_and_shape_option(dynamic_model_path: Path) -> None:
    prof = layerperf.profile(dynamic_model_path, warmup=0, runs=1, latency=False)
    assert prof.layers[0].inputs[0].shape[0] == 1
    prof4 = layerperf.profile(dynamic_model_path, warmup=0, runs=1, latency=False, shapes=["input=4x3x16x16"])
    assert prof4.layers[0].inputs[0].shape[0] == 4


def test_inputs_npz(tiny_model_path: Path, tmp_path: Path) -> None:
    npz = tmp_path / "in.npz"
    np.savez(npz, input=np.ones((1, 3, 16, 16), np.float32))
    prof = layerperf.profile(tiny_model_path, warmup=0, runs=1, latency=False, inputs=npz)
    assert prof.metadata.plan.inputs_file == str(npz)


def test_an_in_memory_model_leaves_no_file_behind(tmp_path: Path) -> None:
    # profiling a ModelProto writes it to a temporary file for ONNX Runtime: gone when the process ends
    script = ("import glob, sys, tempfile, layerperf\n"
              "from layerperf import zoo\n"
              "layerperf.profile(zoo.build('resnet18', image_size=32), runs=1, warmup=0, latency=False)\n"
              "print(len(glob.glob(tempfile.gettempdir() + '/layerperf-*.onnx')))\n")
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.strip()) == 1  # there while the process runs
    assert not list(tmp_path.glob("layerperf-*.onnx"))  # and removed at its exit
