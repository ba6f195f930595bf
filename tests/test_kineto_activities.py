"""The Kineto reader's device activities on disk (readers/kineto_activities.py), the GPU views' source for
traces of any size: the same activities, columns and string tables as the whole-file reading's kernel
table, in every order the views ask for, on the real traces and on fuzzed ones (duplicate ids, calls with
no op, activities linked only through the op around their call)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from layerperf.analysis.gpu.source import InMemory
from layerperf.data.calls import KernelTable
from layerperf.errors import InputError
from layerperf.readers import kineto_activities, kineto_links, parallel
from layerperf.readers.detect import read_folded, read_table
from layerperf.readers.kineto_stream import fold
from layerperf.readers.stream import open_events

DATA = Path(__file__).parent / "data"
REAL = [DATA / "torch_resnet18_cuda" / "trace.json.gz", DATA / "torch_cuda" / "trace.json.gz"]
NUMBERS = ("dur_ns", "ts_ns", "stream", "correlation", "launch_ts_ns", "launch_dur_ns", "bytes", "launch_thread")
ORDERS = [(), ("ts_ns",), ("stream", "ts_ns"), ("launch_ts_ns",), ("owner", "ts_ns")]


def _streamed(path: Path) -> Any:
    return fold(open_events(path), {}, activities=True).meta


def _whole(blocks: list[KernelTable]) -> dict[str, Any]:
    out: dict[str, Any] = {c: np.concatenate([getattr(b, c) for b in blocks]) for c in (*NUMBERS, "owner")}
    for c in ("name", "kind", "device", "launcher"):
        out[c] = [s for b in blocks for s in getattr(b, c).tolist()]
    return out


def _same(disk: Any, kernels: KernelTable, by: tuple[str, ...]) -> None:
    got = _whole(list(disk.blocks(*by)))
    want = _whole(list(InMemory(kernels).blocks(*by)))
    for c in NUMBERS:
        assert np.array_equal(got[c], want[c], equal_nan=True), (by, c)
    for c in ("name", "kind", "device", "launcher"):
        assert got[c] == want[c], (by, c)
    # the owner is a key of the op call (its position in the trace, not a row): the same calls, in the same order
    pairs = sorted(set(zip(got["owner"].tolist(), want["owner"].tolist(), strict=True)))
    assert len(pairs) == len({p[0] for p in pairs}) == len({p[1] for p in pairs})
    assert [p[1] for p in pairs] == sorted(p[1] for p in pairs)
    assert ((got["owner"] < 0) == (want["owner"] < 0)).all()


def _check(path: Path) -> int:
    kernels = read_table(path).meta.get("kernels")
    meta = _streamed(path)
    disk = meta["activities"]
    try:
        if kernels is None:
            assert len(disk) == 0
            return 0
        assert len(disk) == len(kernels)
        for by in ORDERS:
            _same(disk, kernels, by)
        first = next(disk.blocks())
        assert first.name.values == kernels.name.values and first.launcher.values == kernels.launcher.values
        return len(kernels)
    finally:
        disk.close()
        assert not disk.dir.exists()


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.parent.name)
def test_real_traces_same_activities_in_every_order(path: Path) -> None:
    assert _check(path) > 0


def test_steps_and_annotations_as_the_whole_reading_has_them() -> None:
    whole = read_table(REAL[1]).meta
    meta = _streamed(REAL[1])
    meta["activities"].close()
    assert meta["run_windows_ns"] == whole["run_windows_ns"]
    a, b = meta["annotations"], whole["annotations"]
    assert a.name.tolist() == b.name.tolist() and np.array_equal(a.ts_ns, b.ts_ns)
    assert np.array_equal(a.dur_ns, b.dur_ns) and np.array_equal(a.gpu, b.gpu)
    assert np.array_equal(a.thread, b.thread) and (a.thread >= 0).all()


def _event(r: random.Random) -> dict[str, Any]:
    cat = r.choice(["cpu_op", "cpu_op", "cuda_runtime", "cuda_runtime", "kernel", "kernel", "gpu_memcpy",
                    "user_annotation"])
    name = {"cpu_op": r.choice(["aten::conv2d", "aten::mm", "ProfilerStep#1"]), "cuda_runtime": "cudaLaunchKernel",
            "kernel": r.choice(["k1", "k2", "ncclKernel_x"]), "gpu_memcpy": "Memcpy HtoD"}.get(cat, "note")
    args: dict[str, Any] = {}
    if r.random() < 0.6:
        args["External id"] = r.randint(1, 25)
    if r.random() < 0.7 and cat != "cpu_op":
        args["correlation"] = r.randint(1, 25)
    if cat == "gpu_memcpy" and r.random() < 0.7:
        args["bytes"] = r.randint(1, 1 << 20)
    return {"ph": "X", "cat": cat, "name": name, "pid": 1 if cat in ("cpu_op", "cuda_runtime") else 0,
            "tid": r.choice([1, 2]) if cat in ("cpu_op", "cuda_runtime", "user_annotation") else r.choice([7, 8]),
            "ts": round(r.uniform(0, 500), 3), "dur": round(r.uniform(0, 60), 3), "args": args}


def _linked_by_two(monkeypatch: pytest.MonkeyPatch, two: bool) -> None:
    """Where ``two``, the activities linked by this process and a forked child (readers/kineto_links.py) however
    few they are: the lone ones and the calls with no op around them counted by both."""
    if two:
        monkeypatch.setattr(kineto_links, "TWO_FROM", 0)
        monkeypatch.setattr(parallel, "spare_cpu", lambda: True)


@pytest.mark.parametrize("seed", range(12))
def test_fuzzed_traces_same_activities(tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    r = random.Random(seed)
    monkeypatch.setattr(kineto_links, "BLOCK", r.choice([1, 3, 64]))  # activities resolved a few at a time
    _linked_by_two(monkeypatch, seed % 2 == 1)
    monkeypatch.setattr(kineto_activities, "BLOCK", r.choice([1, 5, 64]))
    path = tmp_path / "t.json"
    events = [_event(r) for _ in range(r.choice([40, 300]))]
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    try:
        read_table(path)
    except InputError:
        return  # nothing timed: no views either
    assert _check(path) > 0


def test_sort_keys_an_integer_then_floats_only() -> None:
    meta = _streamed(REAL[1])
    disk = meta["activities"]
    try:
        rec = np.zeros(5, dtype=[("stream", "<i8"), ("t", "<f8"), ("step", "<f8")])
        rec["stream"], rec["t"], rec["step"] = [2, 1, 2, 1, 1], [5.0, np.nan, 1.0, 2.0, 2.0], [1, -1, -1, -1, 1]
        out = np.concatenate(list(disk.sort([rec[:2], rec[2:]], "stream", "t", "step")))
        want = rec[[3, 4, 1, 2, 0]]  # NaN last in its stream; ties by the next key
        for field in ("stream", "t", "step"):
            assert np.array_equal(out[field], want[field], equal_nan=True)
        with pytest.raises(ValueError, match="integer key first"):
            list(disk.sort([rec], "t", "stream"))
    finally:
        disk.close()


@pytest.mark.parametrize("seed", range(6))
def test_fuzzed_duplicate_ids_fold_as_the_whole_reading(tmp_path: Path, seed: int,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Ops sharing an External id, calls sharing a correlation id: the first of each in the file takes the
    device time, streamed as whole (the streamed reading once gave it to every op with the id)."""
    from layerperf.analysis import aggregate as analysis
    from stream_traces import same_figures as _same
    from stream_traces import shrink

    r = random.Random(100 + seed)
    shrink(monkeypatch, segment=40, run=97, merge=50, block=13)
    monkeypatch.setattr(kineto_links, "BLOCK", r.choice([1, 5, 64]))
    _linked_by_two(monkeypatch, seed % 2 == 1)
    path = tmp_path / "t.json"
    events = [_event(r) for _ in range(400)]
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    table = read_table(path)
    folded = read_folded(path, quantiles=True)
    assert folded.calls == len(table)
    assert folded.meta["device_unlinked"] == table.meta["device_unlinked"]
    for how in ("sum", "count", "max"):
        _same(analysis.aggregate(table, "name", how), folded.table("name", how), how)
    assert np.nansum(table.device_ns) > 0


@pytest.mark.parametrize("zipped", [False, True], ids=["plain", "gzip"])
def test_read_by_two_processes_same_activities(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, zipped: bool) -> None:
    """Read by two processes (each numbering identities on its own, ops, calls and kernels in both stretches):
    the same activities, steps and annotations as the whole-file reading."""
    import gzip

    from test_streaming import _split_small

    r = random.Random(7)
    events = [_event(r) for _ in range(3000)]
    for e in events[1500:]:  # ids of their own in the second stretch: its ops are the ones linked there
        for key in ("External id", "correlation"):
            if key in e["args"]:
                e["args"][key] += 100
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    if zipped:
        path = tmp_path / "t.json.gz"
        path.write_bytes(gzip.compress((tmp_path / "t.json").read_bytes()))
    _split_small(monkeypatch)
    whole = read_table(path).meta
    meta = read_folded(path, activities=True).meta
    disk = meta["activities"]
    try:
        assert meta.get("processes") == 2 and meta["stretches"] > 2 and len(disk) == len(whole["kernels"])
        for by in ORDERS:
            _same(disk, whole["kernels"], by)
        assert meta["run_windows_ns"] == whole["run_windows_ns"]
        assert meta["annotations"].name.tolist() == whole["annotations"].name.tolist()
        assert np.array_equal(meta["annotations"].ts_ns, whole["annotations"].ts_ns)
        assert np.array_equal(meta["annotations"].thread, whole["annotations"].thread)
    finally:
        disk.close()
