"""Constructed traces for the streaming tests: nesting, B/E pairs, control flow, out-of-order files."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from layerperf.analysis import aggregate as analysis
from layerperf.data.calls import STRING_COLUMNS, Calls
from layerperf.data.fold import Folded
from layerperf.data.sketch import ALPHA
from layerperf.readers import detect, spill, streaming


def shrink(monkeypatch: pytest.MonkeyPatch, *, segment: int, run: int, merge: int, block: int) -> None:
    """The streaming reader's buffers made small (records per segment, sorted run, merge, least merge
    block), so that small traces cross many of their boundaries."""
    monkeypatch.setattr(streaming, "SEGMENT_RECORDS", segment)
    monkeypatch.setattr(spill, "RUN_RECORDS", run)
    monkeypatch.setattr(spill, "MERGE_RECORDS", merge)
    monkeypatch.setattr(spill, "MIN_BLOCK", block)


def tef_nested(path: Path, n_top: int = 150, seed: int = 0, shuffle: bool = True) -> Path:
    """Three threads of top-level ops with children (X and B/E), grandchildren that spill past their
    parent's end, zero-length events, fractional µs; X events shuffled (a producer's own order)."""
    rng = random.Random(seed)
    ev: list[dict[str, Any]] = []
    for tid in (1, 2, 3):
        ts = 1000.0
        for i in range(n_top):
            d = rng.randint(20, 60) + rng.random()
            ev.append({"ph": "X", "name": f"top{i % 7}", "cat": "op", "pid": 9, "tid": tid, "ts": ts, "dur": d,
                       "args": {"op_type": f"T{i % 3}", "flops": 1000 * (i % 4)}})
            c = ts + 1.5
            for k in range(rng.randint(0, 3)):
                cd = rng.randint(1, 5) + rng.random()
                if rng.random() < 0.3:
                    ev.append({"ph": "B", "name": f"b{k}", "pid": 9, "tid": tid, "ts": c, "args": {"op_type": "B"}})
                    ev.append({"ph": "E", "pid": 9, "tid": tid, "ts": c + cd})
                else:
                    ev.append({"ph": "X", "name": f"child{k}", "cat": "op", "pid": 9, "tid": tid, "ts": c, "dur": cd,
                               "args": {"op_type": "C", "flops": 100 * k}})
                    if rng.random() < 0.2:
                        ev.append({"ph": "X", "name": "gc", "cat": "op", "pid": 9, "tid": tid, "ts": c + 0.5,
                                   "dur": cd + (2 if rng.random() < 0.3 else -0.4), "args": {"op_type": "C"}})
                c += cd + 0.25
            if rng.random() < 0.1:
                ev.append({"ph": "X", "name": "zero", "pid": 9, "tid": tid, "ts": ts, "dur": 0})
            ts += d + rng.choice([0, 0.5, 3])
    if shuffle:
        xs = [e for e in ev if e["ph"] == "X"]
        rest = [e for e in ev if e["ph"] != "X"]  # B before its E: kept in order
        rng.shuffle(xs)
        ev = xs[: len(xs) // 2] + rest + xs[len(xs) // 2:]
    path.write_bytes(orjson.dumps({"traceEvents": ev}))
    return path


def ort_loop(path: Path, runs: int = 40, seed: int = 1) -> Path:
    """An ONNX Runtime profile whose runs hold a Loop node with a body, each event written when it ends
    (the body before its Loop), a model_run per run."""
    rng = random.Random(seed)
    ev: list[dict[str, Any]] = []
    ts = 0
    shapes = {"input_type_shape": [{"float": [1, 3, 8, 8]}], "output_type_shape": [{"float": [1, 3, 8, 8]}]}
    for _ in range(runs):
        r0 = ts
        for i in range(20):
            if i == 10:
                loop_ts = ts
                for _it in range(3):
                    for body, op in (("badd", "Add"), ("bmul", "Mul")):
                        d = rng.randint(1, 4)
                        ev.append({"cat": "Node", "name": f"{body}_kernel_time", "ph": "X", "pid": 1, "tid": 7,
                                   "ts": ts, "dur": d, "args": {"op_name": op, "provider": "CPUExecutionProvider",
                                                                "input_type_shape": [{"float": [1, 8]}] * 2,
                                                                "output_type_shape": [{"float": [1, 8]}]}})
                        ts += d
                ev.append({"cat": "Node", "name": "loop_kernel_time", "ph": "X", "pid": 1, "tid": 7, "ts": loop_ts,
                           "dur": ts - loop_ts, "args": {"op_name": "Loop", "provider": "CPUExecutionProvider"}})
                continue
            d = rng.randint(0, 30)
            ev.append({"cat": "Node", "name": f"n{i}_kernel_time", "ph": "X", "pid": 1, "tid": 7, "ts": ts, "dur": d,
                       "args": {"op_name": ["Conv", "Relu", "Add"][i % 3], "provider": "CPUExecutionProvider",
                                **shapes}})
            ts += d
        ev.append({"cat": "Session", "name": "model_run", "ph": "X", "pid": 1, "tid": 7, "ts": r0, "dur": ts - r0})
        ts += 5
    path.write_bytes(orjson.dumps(ev))
    return path


def kineto_launches(path: Path, calls: int = 200, seed: int = 2) -> Path:
    """A PyTorch (Kineto) trace: ops with a nested op each, the runtime call that launched a kernel from
    the nested op, the kernel — linked by External id, by correlation through the call, or (no External
    id anywhere) to the op around the call; every op written first, calls and kernels after, as Kineto does."""
    rng = random.Random(seed)
    cpu: list[dict[str, Any]] = []
    gpu: list[dict[str, Any]] = []
    ts, free = 1000.0, 0.0
    for i in range(calls):
        dur = round(rng.uniform(5, 40), 3)
        child = round(dur * rng.uniform(0.3, 0.8), 3)
        name = rng.choice(["aten::conv2d", "aten::addmm", "aten::relu"])
        cpu.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
                    "args": {"External id": 2 * i + 1}})
        cpu.append({"ph": "X", "cat": "cpu_op", "name": name + "_impl", "pid": 1, "tid": 1, "ts": round(ts + 0.2, 3),
                    "dur": child, "args": {"External id": 2 * i + 2}})
        how = i % 3  # 0: the kernel names the op; 1: through the call's External id; 2: the op around the call
        launch = {"External id": 2 * i + 2} if how == 1 else {}
        gpu.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                    "ts": round(ts + 0.3, 3), "dur": round(child / 2, 3), "args": {**launch, "correlation": i + 7}})
        start = round(max(free, ts + 4), 3)
        kdur = round(rng.uniform(1, 30), 3)
        free = start + kdur
        kernel = {"External id": 2 * i + 2} if how == 0 else {}
        gpu.append({"ph": "X", "cat": "kernel", "name": f"k_{name[6:]}", "pid": 0, "tid": 7, "ts": start, "dur": kdur,
                    "args": {**kernel, "correlation": i + 7, "device": 0}})
        ts = round(ts + dur + 0.5, 3)
    path.write_bytes(orjson.dumps({"schemaVersion": 1, "traceEvents": cpu + gpu}))
    return path


FIGURES = ("dur_ns", "total_ns", "incl_ns", "device_ns", "flops", "bytes", "int_ops", "calls")


def same_figures(ref: Calls, got: Calls, how: str) -> None:
    """Two aggregated tables alike: the same groups, figures and counters equal (medians within the sketch's
    error), unknown (NaN) in the same places."""
    assert len(ref) == len(got)
    for column in STRING_COLUMNS:
        assert ref.labels(column).tolist() == got.labels(column).tolist(), column
    assert list(ref.counters) == list(got.counters)  # in the same order: they are columns of the output
    pairs = [(name, getattr(ref, name), getattr(got, name)) for name in (*FIGURES, "device_incl")]
    for name, a, b in pairs + [(f"counter {c}", ref.counters[c], got.counters[c]) for c in ref.counters]:
        if how == "median":
            assert np.allclose(a, b, equal_nan=True, rtol=ALPHA), name
        else:  # sums in another order may differ in the last bit
            assert np.allclose(a, b, equal_nan=True, rtol=1e-12, atol=1e-9), name


def check_folded(path: Path) -> Folded:
    """The trace at ``path`` folded as it streams: every grouping and statistic as the table read whole gives."""
    table = detect.read_table(path)
    folded = detect.read_folded(path, quantiles=True)
    assert isinstance(folded, Folded)
    assert folded.calls == len(table)
    assert folded.meta["total_ns"] == pytest.approx(table.meta["total_ns"])
    for by in ("name", "type", "provider", "shape"):
        for how in analysis.AGGREGATES:
            same_figures(analysis.aggregate(table, by, how), folded.table(by, how), how)
    return folded
