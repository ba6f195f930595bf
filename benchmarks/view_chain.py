"""What ONNX Runtime's profiler records for a layer that does no work: a chain of view nodes (Reshape,
handing its input over) run with the profiler off and on, runs alternated in one process.

Per node: the real cost (the unprofiled run's time over the chain's length), the profiled run's, and the
time the profiler records for the node itself (its kernel event's ``dur``, whole µs). The difference of
the first two is the profiler's own cost per node; a view layer's in-situ time in a profile is mostly that
cost, which is why the fidelity ranks the layers apart from the views as well (see README, "How counts are
attributed"). A chain of tiny Relu nodes (64 floats each) is measured beside it for a node that does work.

    python benchmarks/view_chain.py [--nodes 400] [--runs 300] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from layerperf.readers.ort import split_runs

SHAPES = ([128, 768], [1, 128, 768], [1, 128, 12, 64])


def chain(kind: str, n: int) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """``n`` Reshapes over a 1x128x768 tensor (shapes in turn), or ``n`` Relus over 64 floats."""
    shape = [1, 128, 768] if kind == "Reshape" else [64]
    nodes, inits, prev = [], [], "x"
    for i in range(n):
        if kind == "Reshape":
            inits.append(numpy_helper.from_array(np.array(SHAPES[i % 3], np.int64), f"s{i}"))
            nodes.append(helper.make_node("Reshape", [prev, f"s{i}"], [f"t{i}"], name=f"n{i}"))
        else:
            nodes.append(helper.make_node("Relu", [prev], [f"t{i}"], name=f"n{i}"))
        prev = f"t{i}"
    nodes.append(helper.make_node("Identity", [prev], ["y"], name="out"))
    graph = helper.make_graph(nodes, kind, [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model, {"x": np.random.default_rng(0).random(shape, dtype=np.float32)}


def session(model: onnx.ModelProto, threads: int, prefix: Path | None) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # the chain as written
    so.intra_op_num_threads = threads
    so.log_severity_level = 3
    if prefix is not None:
        so.enable_profiling = True
        so.profile_file_prefix = str(prefix)
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def measure(kind: str, n: int, runs: int, threads: int, tmp: Path) -> dict[str, float]:
    model, feed = chain(kind, n)
    plain, profiled = session(model, threads, None), session(model, threads, tmp / kind)
    took: dict[str, list[int]] = {"plain": [], "profiled": []}
    clock = time.perf_counter_ns
    for _ in range(runs):
        for name, sess in (("plain", plain), ("profiled", profiled)):
            t0 = clock()
            sess.run(None, feed)
            took[name].append(clock() - t0)
    events = json.loads(Path(profiled.end_profiling()).read_text())
    recorded = [node.dur_us for run in split_runs(events)[1:] for node in run.nodes if node.name != "out"]
    plain_us, prof_us = (float(np.median(took[k])) / 1e3 / n for k in ("plain", "profiled"))
    return {"plain_us": plain_us, "profiled_us": prof_us, "recorded_us": float(np.median(recorded)),
            "recorded_mean_us": float(np.mean(recorded))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=400)
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    print(f"onnxruntime {ort.__version__}, {args.nodes} nodes a chain, {args.runs} runs each way, alternated, "
          f"{args.threads} thread(s); per node, µs")
    print(f"{'chain':8s} {'profiler off':>13s} {'profiler on':>12s} {'profiler cost':>14s} "
          f"{'recorded dur (median, mean)':>28s}")
    with tempfile.TemporaryDirectory(prefix="view-chain-") as tmp:
        for kind in ("Reshape", "Relu"):
            got = measure(kind, args.nodes, args.runs, args.threads, Path(tmp))
            print(f"{kind:8s} {got['plain_us']:13.2f} {got['profiled_us']:12.2f} "
                  f"{got['profiled_us'] - got['plain_us']:14.2f} "
                  f"{got['recorded_us']:19.1f}, {got['recorded_mean_us']:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
