"""Big traces for the scale benchmark, written chunk by chunk (never held whole), plain or gzipped.

- ``ort``: what ONNX Runtime's profiler writes — a JSON array of ``<node>_kernel_time`` Node events
  (op_name, provider, input/output type and shape) and a ``model_run`` Session event after each run's
  200 nodes, each event written when it ends.
- ``kineto``: what PyTorch's profiler writes — an object with ``schemaVersion`` and
  ``deviceProperties`` whose ``traceEvents`` hold every CPU operator first (a ``ProfilerStep#N`` per
  step, aten ops with a nested ``aten::`` child each), then the ``cudaLaunchKernel`` runtime calls
  and their kernels, in time order, linked by ``External id`` and ``correlation``.

``events`` counts every event written. Durations are random (seeded) whole and fractional µs. ``shapes``:
the distinct input shapes each node or op is called with, as a decoder's sequence grows step by step (an
ONNX Runtime run ``k``, or a Kineto op's ``k``-th call, sees length ``1 + k % shapes``): the trace then
names ``shapes`` times as many distinct ops. A million ONNX Runtime events (5,000 runs of 200 nodes) name
300,000 with ``shapes=1500``; a million Kineto events (250,000 calls of 8 ops) name 250,000 with
``shapes=31250``.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np
import orjson

OPS = ("Conv", "Relu", "MaxPool", "Gemm", "Add", "MatMul", "Softmax", "LayerNormalization")
NODES = 200  # per run
CHUNK = 100_000  # events made and written at a time
SHAPES = {"input_type_shape": [{"float": [1, 64, 56, 56]}, {"float": [64, 64, 3, 3]}],
          "output_type_shape": [{"float": [1, 64, 56, 56]}]}


def _open(path: Path) -> IO[bytes]:
    if path.suffix == ".gz":
        try:  # ISA-L compresses ~10x faster than zlib at its level 1; zlib level 1 else
            from isal import igzip

            return igzip.open(path, "wb", compresslevel=1)  # type: ignore[no-any-return]
        except ImportError:
            return gzip.open(path, "wb", compresslevel=1)
    return path.open("wb")


def _write(path: Path, head: bytes, chunks: Iterator[list[dict[str, Any]]], tail: bytes) -> int:
    n = 0
    with _open(path) as f:
        f.write(head)
        sep = b""
        for chunk in chunks:
            if chunk:
                f.write(sep + orjson.dumps(chunk)[1:-1])
                sep = b",\n"
                n += len(chunk)
        f.write(tail)
    return n


def _seq_shapes(seq: int) -> dict[str, Any]:
    return {"input_type_shape": [{"float": [1, seq, 768]}, {"float": [768, 768]}],
            "output_type_shape": [{"float": [1, seq, 768]}]}


def _ort_chunks(n_events: int, seed: int, shapes: int = 1) -> Iterator[list[dict[str, Any]]]:
    rng = np.random.default_rng(seed)
    nodes = [(f"/model/layer{i}/{OPS[i % len(OPS)]}", OPS[i % len(OPS)]) for i in range(NODES)]
    ts, made, run_start, i = 1000, 0, 1000, 0
    args = SHAPES if shapes == 1 else _seq_shapes(1)
    while made < n_events:
        durs = rng.integers(1, 500, CHUNK).tolist()
        events = []
        for dur in durs:
            if made >= n_events:
                break
            name, op = nodes[i % NODES]
            events.append({"cat": "Node", "name": f"{name}_kernel_time", "ph": "X", "pid": 1, "tid": 1, "ts": ts,
                           "dur": dur, "args": {"op_name": op, "provider": "CPUExecutionProvider", **args}})
            ts += dur + 1
            made += 1
            i += 1
            if i % NODES == 0 and made < n_events:  # the run ends: its event is written now
                events.append({"cat": "Session", "name": "model_run", "ph": "X", "pid": 1, "tid": 1,
                               "ts": run_start, "dur": ts - run_start, "args": {}})
                made += 1
                ts += 5
                run_start = ts
                if shapes > 1:
                    args = _seq_shapes(1 + (i // NODES) % shapes)
        yield events


def write_ort(path: Path, n_events: int, seed: int = 0, shapes: int = 1) -> int:
    return _write(path, b"[\n", _ort_chunks(n_events, seed, shapes), b"\n]\n")


# Kineto: per op call 5 events (op, its nested aten child, runtime launch, kernel, and half of the
# time a second op level), counted so; a step holds STEP_OPS op calls
STEP_OPS = 200
_PER_CALL = 4


def _kineto_calls(n_events: int, seed: int) -> Iterator[tuple[int, int, float, float, float, float, float]]:
    """(step, op index, op start, op dur, child dur, launch offset, kernel dur) per op call, µs."""
    rng = np.random.default_rng(seed)
    calls = n_events // _PER_CALL
    ts = 1_000_000.0
    made = 0
    while made < calls:
        n = min(CHUNK, calls - made)
        dur = np.round(rng.uniform(5, 60, n), 3).tolist()
        child = np.round(rng.uniform(0.4, 0.8, n), 3).tolist()
        kdur = np.round(rng.uniform(1, 80, n), 3).tolist()
        for k in range(n):
            index = made + k
            yield index // STEP_OPS, index, ts, dur[k], round(dur[k] * child[k], 3), 1.0, kdur[k]
            ts = round(ts + dur[k] + 0.5, 3)
        made += n


def _step(s: int, first_ts: float, last_end: float) -> dict[str, Any]:
    return {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": 1, "tid": 1,
            "ts": round(first_ts - 0.25, 3), "dur": round(last_end - first_ts + 0.4, 3),
            "args": {"External id": 1 << 40 | s}}


def _kineto_cpu(n_events: int, seed: int, shapes: int = 1) -> Iterator[list[dict[str, Any]]]:
    events: list[dict[str, Any]] = []
    step, first_ts, last_end = -1, 0.0, 0.0
    dims = [[8, 64, 56, 56]]
    for s, index, ts, dur, child, _, _ in _kineto_calls(n_events, seed):
        if s != step:
            if step >= 0:  # the step's frame, once its last op is known
                events.append(_step(step, first_ts, last_end))
            step, first_ts = s, ts
        last_end = ts + dur
        op = OPS[index % len(OPS)]
        events.append({"ph": "X", "cat": "cpu_op", "name": f"aten::{op.lower()}", "pid": 1, "tid": 1, "ts": ts,
                       "dur": dur, "args": {"External id": 2 * index + 1, "Input Dims": dims if shapes == 1 else
                                            [[1, 1 + (index // len(OPS)) % shapes, 768]]}})
        events.append({"ph": "X", "cat": "cpu_op", "name": f"aten::_{op.lower()}_impl", "pid": 1, "tid": 1,
                       "ts": round(ts + 0.2, 3), "dur": child, "args": {"External id": 2 * index + 2}})
        if len(events) >= CHUNK:
            yield events
            events = []
    if step >= 0:
        events.append(_step(step, first_ts, last_end))
    yield events


def _kineto_gpu(n_events: int, seed: int) -> Iterator[list[dict[str, Any]]]:
    events: list[dict[str, Any]] = []
    gpu_free = 0.0
    for _, index, ts, _, child, _, kdur in _kineto_calls(n_events, seed):
        launch = round(ts + 0.3, 3)
        corr = index + 1
        start = round(max(gpu_free, launch + 4.0), 3)
        gpu_free = start + kdur
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": launch, "dur": round(child * 0.5, 3),
                       "args": {"External id": 2 * index + 2, "correlation": corr}})
        events.append({"ph": "X", "cat": "kernel", "name": f"kernel_{OPS[index % len(OPS)]}", "pid": 0, "tid": 7,
                       "ts": start, "dur": kdur, "args": {"External id": 2 * index + 2, "correlation": corr,
                                                          "device": 0, "stream": 7}})
        if len(events) >= CHUNK:
            yield events
            events = []
    yield events


def write_kineto(path: Path, n_events: int, seed: int = 0, shapes: int = 1) -> int:
    head = orjson.dumps({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "generated"}]})[:-1]

    def both() -> Iterator[list[dict[str, Any]]]:
        yield from _kineto_cpu(n_events, seed, shapes)
        yield from _kineto_gpu(n_events, seed)

    return _write(path, head + b',"traceEvents":[\n', both(), b"\n]}\n")


WRITERS = {"ort": write_ort, "kineto": write_kineto}
