"""Per-node perf counters on ONNX Runtime through the stepwise executor, in a worker process.

Why a worker process: every one-node session would otherwise start its own intra-op thread pool
(hundreds of threads, each needing its own counter group read at every node boundary). A fresh
process can set ONNX Runtime's global thread pool before its environment exists, so all node
sessions share one pool — the threads that do the model's work — and counters open on those.

Counting is the collectors' (:mod:`layerperf.collectors.driver`), at the stepwise executor's node
boundaries: events are scheduled into groups the PMU counts exactly, each over ``passes`` passes of
the whole graph; the cost of a stepwise call itself (calibrated on an empty Identity node, run by a
stepwise executor of its own and read the same way) is subtracted. With ``multiplex`` every event is
in one group over the same passes, scaled by time_enabled/time_running, with the fraction counted
kept beside each count. What is ONNX Runtime's stays here: the worker, its global thread pool, the
optimized graph and the calibration node.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import onnxruntime.capi._pybind_state as ort_state

from layerperf.backends.ort.measure import OPT_LEVELS
from layerperf.backends.ort.reference import SAMPLE_PERIOD_NS, InSituRuns
from layerperf.backends.ort.session import Session
from layerperf.backends.ort.stepwise import StepwiseExecutor, calibration_model
from layerperf.collectors import Collectors, CounterRequest, PassFn
from layerperf.collectors.perf_counts import CounterResult
from layerperf.counters import EventSpec, resolve
from layerperf.counters.abi import PERF_TYPE_SOFTWARE
from layerperf.data.profile import CounterInfo
from layerperf.data.tensor import lacks_numpy, numpy_dtype
from layerperf.errors import BackendError, CounterError, LayerperfError
from layerperf.models import extdata
from layerperf.models.skeleton import INLINE_LIMIT_BYTES, read_skeleton
from layerperf.util.malloc_trim import release


def count_layers(model_path: Path, opts: dict[str, Any], feed: dict[str, np.ndarray], order: list[str],
                 request: CounterRequest, data_dir: Path | None = None) -> dict[str, Any]:
    """Run the worker and return its result: counts per label per node per pass, node times, calibration.

    ``data_dir`` is where the model's external data lives (default: beside ``model_path``).
    """
    with tempfile.TemporaryDirectory(prefix="layerperf-count-") as tmp:
        job = Path(tmp) / "job.json"
        result = Path(tmp) / "result.json"
        np.savez(Path(tmp) / "feed.npz", **{k: _storable(v) for k, v in feed.items()})  # type: ignore[arg-type]
        model = Path(model_path).absolute()  # the worker may not share the caller's working directory
        job.write_text(json.dumps({"model": str(model), "data_dir": str(Path(data_dir or model.parent).absolute()),
                                   "opts": opts, "feed": str(Path(tmp) / "feed.npz"), "order": order,
                                   "dtypes": {k: v.dtype.name for k, v in feed.items()},
                                   "request": asdict(request)}))
        proc = subprocess.run([sys.executable, "-m", "layerperf.backends.ort.counting", str(job), str(result)],
                              capture_output=True, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        if not result.exists():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            raise LayerperfError(f"the counting worker failed (exit {proc.returncode}): {tail[0]}")
        out: dict[str, Any] = json.loads(result.read_text())
    if "error" in out:
        err = out["error"]
        cls = {"CounterError": CounterError, "BackendError": BackendError}.get(err["type"], LayerperfError)
        raise cls(err["message"], err.get("hint"))
    return out


def _storable(arr: np.ndarray) -> np.ndarray:
    # an .npz keeps no ml_dtypes type (bfloat16, float8, int4): their bits go as unsigned integers
    return arr.view(f"u{arr.dtype.itemsize}") if lacks_numpy(arr.dtype) else arr


def _restored(arr: np.ndarray, dtype_name: str | None) -> np.ndarray:
    dtype = numpy_dtype(dtype_name) if dtype_name else None
    return arr.view(dtype) if dtype is not None and lacks_numpy(dtype) else arr


def apply_counts(layers: list[Any], result: dict[str, Any], request: CounterRequest) -> CounterInfo:
    """Put each node's per-pass counts on its layer; return how they were counted."""
    return CounterResult.from_json(result).apply(layers, request)


# -- worker side ------------------------------------------------------------------------------------

def _optimized(model_path: str, opts: dict[str, Any], data_dir: Path, workdir: Path) -> Any:
    """The optimized graph, its large weights written by ONNX Runtime to ``workdir`` and left there.

    Python never holds them: each node's session reads its own from ``workdir`` as it is built. The
    session that writes the graph never runs, so it pre-packs nothing, and it is gone before the
    node sessions are made.
    """
    so = ort.SessionOptions()
    so.graph_optimization_level = OPT_LEVELS[opts["opt_level"]]
    so.optimized_model_filepath = str(workdir / "opt.onnx")
    so.add_session_config_entry("session.optimized_model_external_initializers_file_name", "opt.onnx.data")
    so.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes",
                                str(INLINE_LIMIT_BYTES))
    so.add_session_config_entry("session.disable_prepacking", "1")
    so.log_severity_level = 3
    so.use_per_session_threads = False
    model_or_bytes: str | bytes = model_path
    if Path(model_path).parent != data_dir:  # a model given as bytes, saved apart from its data
        model_or_bytes = Path(model_path).read_bytes()
        extdata.use_folder(so, data_dir)
    Session(model_or_bytes, so, opts["provider"], what=model_path)
    release()
    model = onnx.load(str(workdir / "opt.onnx"), load_external_data=False)
    extdata.data_files(model, workdir, model_path)  # every location inside workdir, and there
    return model


def _calibration_pass(opts: dict[str, Any]) -> PassFn:
    """One stepwise pass over an empty Identity node: what a stepwise call costs when the node does nothing."""
    executor = StepwiseExecutor(calibration_model(), ["empty"], provider=opts["provider"], global_threads=True)
    feed = {"x": np.zeros(1, np.float32)}
    for _ in range(3):  # sessions built, calls bound (as the model's are before they are counted)
        executor.run_pass(feed)
    return lambda collector: executor.run_pass(feed, collector=collector)


def work(job: dict[str, Any]) -> dict[str, Any]:
    opts, req = job["opts"], job["request"]
    # Must precede the first session of this process: all node sessions then share one pool.
    ort_state.set_global_thread_pool_sizes(int(opts["threads"]), 1)
    with np.load(job["feed"]) as npz:
        feed = {k: _restored(npz[k], job.get("dtypes", {}).get(k)) for k in npz.files}
    data_dir = Path(job["data_dir"])
    # Sessions built from bytes: ONNX Runtime releases that ignore the folder key look for their
    # external data in the working directory, which is this worker's own to choose.
    os.chdir(data_dir)
    with tempfile.TemporaryDirectory(prefix="layerperf-weights-") as tmp:
        workdir = Path(tmp)
        optimized = _optimized(job["model"], opts, data_dir, workdir)
        os.chdir(workdir)  # where the node sessions' weights now are
        executor = StepwiseExecutor(optimized, job["order"], provider=opts["provider"], global_threads=True,
                                    data_dir=workdir, original=read_skeleton(Path(job["model"])))
        # The first pass builds every node's session, each reading its weights; the second warms the caches
        # and shows the tensors' shapes repeat.
        for _ in range(2):
            executor.run_pass(feed)
        executor.run_pass(feed)  # the calls bound now (:mod:`.bound`)
        os.chdir(data_dir)  # out of the folder about to go
    # built after the stepwise sessions: its threads are counted too, but it runs outside the counted passes
    insitu = InSituRuns(job["model"], opts, data_dir, feed)
    request = CounterRequest(tuple(req["events"]), tuple(req["labels"]), int(req["passes"]), bool(req["multiplex"]))
    driver = Collectors(counters=request).driver(len(executor.steps), threads="all",
                                                 calibrate=_calibration_pass(opts), reference=insitu.run)
    driver.run(lambda collector: executor.run_pass(feed, collector=collector))
    assert driver.counted is not None
    sampled = _sampled_specs(request)
    if sampled is not None:
        insitu.sample(sampled[1])
    times, counts = insitu.finish(job["order"], len(sampled[1]) if sampled else 0)
    out = {**driver.counted.to_json(), "insitu_ns": times}
    if sampled is not None:
        labels, _ = sampled
        out.update(sample_period_ns=SAMPLE_PERIOD_NS, insitu_counts={
            label: [[float(run[layer][e]) for run in counts] for layer in range(len(job["order"]))]
            for e, label in enumerate(labels) if label is not None})
    return out


def _sampled_specs(request: CounterRequest) -> tuple[list[str | None], list[EventSpec]] | None:
    """The group sampled in situ, task-clock first (its count is the period), with each member's label
    (None for a task-clock not asked for); None unless every event asked for is a software event."""
    specs = [resolve(e) for e in request.events]
    if not specs or any(s.type != PERF_TYPE_SOFTWARE for s in specs):
        return None
    clock = resolve("task-clock")
    labels: list[str | None] = [next((lab for s, lab in zip(specs, request.labels, strict=True)
                                      if s.key == clock.key), None)]
    group = [clock]
    for spec, label in zip(specs, request.labels, strict=True):
        if spec.key != clock.key:
            group.append(spec)
            labels.append(label)
    return labels, group


def main(argv: list[str]) -> int:
    job_path, result_path = Path(argv[0]), Path(argv[1])
    try:
        out = work(json.loads(job_path.read_text()))
    except LayerperfError as exc:
        out = {"error": {"type": type(exc).__name__, "message": exc.message, "hint": exc.hint}}
    tmp = result_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(out))
    tmp.replace(result_path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
