"""The GPU timeline views (analysis/gpu/) on real Kineto traces, against references computed here from
the raw events (plain Python over the JSON, no layerperf code), and the CLI's ``--view``."""

from __future__ import annotations

import gzip
import json
import random
import statistics
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest

from layerperf.analysis.gpu.annotations import annotation_times
from layerperf.analysis.gpu.idle import KERNEL_WAIT_NS, idle
from layerperf.analysis.gpu.kernel_type import kernel_types
from layerperf.analysis.gpu.launch import launch
from layerperf.analysis.gpu.memcpy import memcpy
from layerperf.analysis.gpu.overlap import overlap
from layerperf.analysis.gpu.queue import queues
from layerperf.analysis.gpu.temporal import temporal
from layerperf.cli import main
from layerperf.readers.detect import read_folded, read_table

DATA = Path(__file__).parent / "data"
H100 = DATA / "torch_resnet18_cuda" / "trace.json.gz"
V100 = DATA / "torch_cuda" / "trace.json.gz"
DEVICE = ("kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset")


def _events(path: Path) -> list[dict[str, Any]]:
    """The complete events, times as exact decimals (µs with up to 3 places: whole ns), so that sums of
    differences of epoch-sized times lose nothing."""
    doc = json.loads(gzip.decompress(path.read_bytes()), parse_float=Decimal)
    return [e for e in doc["traceEvents"] if e.get("ph") == "X"]


def _ns(n: int) -> float:
    """The tolerance in µs of a figure summed over ``n`` times: the reader rounds each to the ns, from a
    float64 that holds an epoch-sized µs time to within half a ns."""
    return max(n, 1) * 1e-3


def _device(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted((e for e in events if e.get("cat") in DEVICE), key=lambda e: e["ts"])


def _corr(e: dict[str, Any]) -> Any:
    return e.get("args", {}).get("correlation")


def _runtime(events: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    return {_corr(e): e for e in events if e.get("cat") in ("cuda_runtime", "Runtime") and _corr(e) is not None}


def _union_us(spans: list[tuple[Any, Any]]) -> Any:
    total: Any = 0
    end: Any = None
    start: Any = 0
    for s, e in sorted(spans):
        if end is None or s > end:
            if end is not None:
                total += end - start
            start, end = s, e
        else:
            end = max(end, e)
    return total + (end - start if end is not None else 0.0)


@pytest.mark.parametrize("path", [H100, V100], ids=["h100", "v100"])
def test_temporal_and_kinds(path: Path) -> None:
    dev = _device(_events(path))
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in dev]
    span = max(e for _, e in spans) - min(s for s, _ in spans)
    busy = _union_us(spans)
    compute = _union_us([(e["ts"], e["ts"] + e["dur"]) for e in dev if e["cat"] in ("kernel", "Kernel")])
    kernels = read_table(path).meta["kernels"]
    whole = temporal(kernels).whole
    assert whole.span_ns / 1e3 == pytest.approx(float(span), abs=_ns(2))
    assert whole.idle_ns / 1e3 == pytest.approx(float(span - busy), abs=_ns(2 * len(dev)))
    assert whole.compute_ns / 1e3 == pytest.approx(float(compute), abs=_ns(2 * len(dev)))  # all computation here
    kinds = {k.kind: k for k in kernel_types(kernels)}
    memory = [e["dur"] for e in dev if e["name"].startswith(("Memcpy", "Memset"))]
    assert kinds["computation"].calls == len(dev) - len(memory)
    if memory:
        assert kinds["memory"].total_ns / 1e3 == pytest.approx(float(sum(memory)), abs=_ns(len(memory)))
        assert kinds["memory"].stddev_ns / 1e3 == pytest.approx(float(statistics.pstdev(memory)), abs=_ns(1))


def test_h100_idle_breakdown() -> None:
    """87.77% idle: 10,275 µs of host wait in 177 gaps, 264 µs of kernel wait in 60 (one stream)."""
    events = _events(H100)
    dev, runtime = _device(events), _runtime(events)
    host: list[float] = []
    short: list[float] = []
    for prev, cur in zip(dev, dev[1:], strict=False):
        gap = cur["ts"] - (prev["ts"] + prev["dur"])
        if runtime[_corr(cur)]["ts"] > prev["ts"] + prev["dur"]:
            host.append(gap)
        elif gap * 1000 < Decimal(KERNEL_WAIT_NS):
            short.append(gap)
    got = {g.cause: g for g in idle(read_table(H100).meta["kernels"])}
    assert got["host wait"].gaps == len(host) == 177
    assert got["host wait"].idle_ns / 1e3 == pytest.approx(float(sum(host)), abs=_ns(2 * len(host)))
    assert round(sum(host)) == 10275
    assert got["kernel wait"].gaps == len(short) == 60 and round(sum(short)) == 264
    assert got["kernel wait"].idle_ns / 1e3 == pytest.approx(float(sum(short)), abs=_ns(2 * len(short)))
    assert got["host wait"].median_ns / 1e3 == pytest.approx(float(statistics.median(host)), abs=_ns(2))
    whole = temporal(read_table(H100).meta["kernels"]).whole
    assert round(100 * whole.idle_ns / whole.span_ns, 2) == 87.77


@pytest.mark.parametrize("path", [H100, V100], ids=["h100", "v100"])
def test_launch_and_queue(path: Path) -> None:
    events = _events(path)
    dev, runtime = _device(events), _runtime(events)
    delays = [max(e["ts"] - runtime[_corr(e)]["ts"] - runtime[_corr(e)]["dur"], 0) for e in dev
              if _corr(e) in runtime]
    kernels = read_table(path).meta["kernels"]
    result = launch(kernels)
    assert result.launches == len(delays)
    assert result.delay_ns / 1e3 == pytest.approx(float(sum(delays)), abs=_ns(3 * len(delays)))
    cpu = sum(runtime[_corr(e)]["dur"] for e in dev if _corr(e) in runtime)
    assert result.cpu_ns / 1e3 == pytest.approx(float(cpu), abs=_ns(len(delays)))
    # queue: +1 at each launch, -1 at each start, one stream
    steps = sorted([(runtime[_corr(e)]["ts"], 0, 1) for e in dev if _corr(e) in runtime]
                   + [(e["ts"], 1, -1) for e in dev if _corr(e) in runtime])
    length, most = 0, 0
    for _, _, step in steps:
        length += step
        most = max(most, length)
    (stats,) = queues(kernels)
    assert stats.max_length == most and stats.changes == len(steps) and stats.full_ns == 0


def test_op_kernel_sequences_h100() -> None:
    """Each cudnn_convolution call's kernels, in order: every call that launched any is one sequence."""
    events = _events(H100)
    calls = {e["args"]["External id"] for e in events if e["name"] == "aten::cudnn_convolution"}
    launched = {e["args"]["External id"] for e in _device(events)} & calls
    sequences = launch(read_table(H100).meta["kernels"]).sequences
    conv = [s for s in sequences if s.op == "aten::cudnn_convolution"]
    assert sum(s.calls for s in conv) == len(launched) == 40  # 20 convolutions, two forward passes
    first = {e["args"]["External id"]: e["name"] for e in reversed(_device(events))}  # each call's first kernel
    assert {s.sequence[0] for s in conv} == {first[x] for x in launched}


def test_memcpy_and_annotations_v100() -> None:
    events = _events(V100)
    copies = [e for e in events if e.get("cat") == "Memcpy"]
    kernels = read_table(V100).meta["kernels"]
    (d,) = memcpy(kernels).directions
    assert d.direction == "Memcpy HtoD" and d.calls == len(copies)
    assert d.bytes == sum(e["args"]["bytes"] for e in copies) and type(d.bytes) is int  # a count, not 2000000.0
    table = read_table(V100)
    (step,) = annotation_times(table.meta["annotations"], kernels)
    raw = next(e for e in events if e["name"].startswith("ProfilerStep#"))
    assert (step.name, step.cpu_calls, step.cpu_ns / 1e3) == (raw["name"], 1, float(raw["dur"]))
    runtime = _runtime(events)
    # the step takes what every thread launched in it: its own and autograd's backward thread (24610 here),
    # where a record_function range takes its own thread's launches only
    inside = [e["dur"] for e in _device(events) if raw["ts"] <= runtime[_corr(e)]["ts"] < raw["ts"] + raw["dur"]]
    mine = [e["dur"] for e in _device(events) if raw["ts"] <= runtime[_corr(e)]["ts"] < raw["ts"] + raw["dur"]
            and (runtime[_corr(e)]["pid"], runtime[_corr(e)]["tid"]) == (raw["pid"], raw["tid"])]
    assert {runtime[_corr(e)]["tid"] for e in _device(events)} == {raw["tid"], "24610"} and sum(mine) < sum(inside)
    assert step.launched_device_ns / 1e3 == pytest.approx(float(sum(inside)))
    assert overlap(kernels).share is None  # no communication kernels


def test_views_cli(capsys: pytest.CaptureFixture[str]) -> None:
    for view in ("temporal", "idle", "kernel-type", "launch", "queue", "memcpy", "overlap", "annotations"):
        assert main(["analyze", str(V100), "--view", view, "--format", "json"]) == 0
        doc = orjson.loads(capsys.readouterr().out)
        assert doc["view"] == view and doc["device"] is True and doc["rows"]
    assert main(["analyze", str(V100), "--view", "temporal", "--format", "json"]) == 0
    rows = orjson.loads(capsys.readouterr().out)["rows"]
    assert [r["label"] for r in rows] == ["whole trace", "ProfilerStep#2"]  # per step where the trace has steps


@pytest.mark.parametrize("flags", [["--aggregate-by", "type"], ["--aggregate", "median"], ["--order-by", "calls"],
                                   ["--min-time", "1"], ["--type", "aten::conv2d"], ["--name", "conv"]])
def test_the_op_tables_flags_are_refused_beside_a_view(capsys: pytest.CaptureFixture[str], flags: list[str]) -> None:
    assert main(["analyze", str(V100), "--view", "idle", *flags]) == 2
    err = capsys.readouterr().err
    assert f"{flags[0]} does not apply to --view idle" in err and err.count("\n") == 1
    assert main(["analyze", str(V100), "--view", "idle", "--aggregate-by", "kernel", "--min-time", "1"]) == 2
    assert "does not apply to --view idle" in capsys.readouterr().err  # the view's refusal, not the kernel table's


def test_type_and_name_pick_a_views_timeline(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    timeline = tmp_path / "t.json"
    assert main(["analyze", str(V100), "--view", "idle", "--name", "Backward", "--timeline", str(timeline)]) == 0
    names = {e["name"] for e in orjson.loads(timeline.read_bytes())["traceEvents"] if e.get("ph") == "X"}
    assert names and all("Backward" in n for n in names)


def test_cpu_only_trace_has_no_device(capsys: pytest.CaptureFixture[str]) -> None:
    cpu = DATA / "torch_cpu" / "trace.json.gz"
    assert main(["analyze", str(cpu), "--view", "idle"]) == 0
    assert "no device" in capsys.readouterr().out
    assert main(["analyze", str(cpu), "--view", "idle", "--format", "json"]) == 0
    assert orjson.loads(capsys.readouterr().out) == {"view": "idle", "source": str(cpu), "device": False, "rows": [],
                                                     "dropped": {}}


def _two_gpus(path: Path, overlap_us: int = 0) -> Path:
    """One process driving GPU 0 and GPU 1, both through their stream 7: kernels 100-200 and 300-400 on
    GPU 0, 150-250 and 350-450 on GPU 1 (``overlap_us``: GPU 0's second kernel starts that much before its
    first ends, and a third runs inside the first)."""
    events: list[dict[str, Any]] = [{"ph": "X", "cat": "cpu_op", "name": "aten::x", "pid": 1, "tid": 1, "ts": 0,
                                     "dur": 50, "args": {"External id": 1}}]
    kernels = [(0, 100, 100), (1, 150, 100), (0, 300 - overlap_us * 2, 100), (1, 350, 100)]
    if overlap_us:
        kernels.append((0, 110, 20))
    for i, (device, ts, dur) in enumerate(kernels):
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": 5 + 5 * i, "dur": 2, "args": {"External id": 1, "correlation": 10 + i}})
        events.append({"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": device, "tid": 7, "ts": ts, "dur": dur,
                       "args": {"External id": 1, "correlation": 10 + i, "stream": 7, "device": device}})
    path.write_bytes(orjson.dumps({"traceEvents": events}))
    return path


def test_idle_and_queue_per_device_stream(tmp_path: Path) -> None:
    # two GPUs' stream 7 are two streams: 100 µs idle on each (not -100 µs, 200% of one merged stream)
    kernels = read_table(_two_gpus(tmp_path / "two.json")).meta["kernels"]
    rows = [(g.device, g.stream, g.gaps, g.idle_ns, g.share) for g in idle(kernels)]
    assert rows == [("GPU 0", 7, 1, 100_000.0, 1.0), ("GPU 1", 7, 1, 100_000.0, 1.0)]
    assert [(q.device, q.stream, q.changes, q.max_length) for q in queues(kernels)] == [
        ("GPU 0", 7, 4, 2), ("GPU 1", 7, 4, 2)]
    folded = read_folded(tmp_path / "two.json", activities=True)  # the activities streamed from disk: the same
    try:
        assert idle(folded.meta["activities"]) == idle(kernels)
        assert queues(folded.meta["activities"]) == queues(kernels)
    finally:
        folded.meta["activities"].close()


def test_streams_are_listed_by_device_number(tmp_path: Path) -> None:
    path = _two_gpus(tmp_path / "two.json")
    path.write_bytes(path.read_bytes().replace(b'"device":1', b'"device":10').replace(b'"device":0', b'"device":2'))
    kernels = read_table(path).meta["kernels"]
    assert [g.device for g in idle(kernels)] == ["GPU 2", "GPU 10"]  # not as text: "GPU 10" < "GPU 2"
    assert [q.device for q in queues(kernels)] == ["GPU 2", "GPU 10"]


def test_idle_counts_no_gap_where_activities_overlap(tmp_path: Path) -> None:
    # GPU 0: 100-200, 110-130 inside it, then 260-360: one gap of 60 µs (from the furthest end, 200, not 130)
    kernels = read_table(_two_gpus(tmp_path / "overlap.json", overlap_us=20)).meta["kernels"]
    gpu0 = [g for g in idle(kernels) if g.device == "GPU 0"]
    assert [(g.gaps, g.idle_ns, g.min_ns) for g in gpu0] == [(1, 60_000.0, 60_000.0)]
    assert temporal(kernels).whole.idle_ns == 10_000.0  # no device busy from 250 to 260 (GPU 1: 150-250, 350-450)


def test_idle_view_cli_names_the_device(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _two_gpus(tmp_path / "two.json")
    assert main(["analyze", str(path), "--view", "idle", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [(r["device"], r["stream"], r["idle_us"]) for r in rows] == [("GPU 0", 7, 100.0), ("GPU 1", 7, 100.0)]


def _step(k: int, ts: float, kernel_ts: float, kernel_us: float) -> list[dict[str, Any]]:
    """A ProfilerStep with one op launching one kernel, and the step's copy on the GPU's timeline that Kineto
    writes (``gpu_user_annotation``, spanning the step's device work)."""
    ext, corr = 10 * k, 100 + k
    return [
        {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}", "pid": 1, "tid": 1, "ts": ts,
         "dur": 100, "args": {"External id": ext}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": ts + 10, "dur": 40,
         "args": {"External id": ext + 1}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts + 20, "dur": 10,
         "args": {"External id": ext + 1, "correlation": corr}},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": kernel_ts, "dur": kernel_us,
         "args": {"External id": ext + 1, "correlation": corr, "device": 0, "stream": 7}},
        {"ph": "X", "cat": "gpu_user_annotation", "name": f"ProfilerStep#{k}", "pid": 0, "tid": 7, "ts": kernel_ts,
         "dur": kernel_us, "args": {"External id": ext, "device": 0, "stream": 7}}]


def test_a_steps_copy_on_the_gpu_is_no_step(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Kineto's gpu_user_annotation copy of ProfilerStep#N is no step of its own: two steps, not four, by
    their names, in the temporal view and the op table's runs, whole and streamed."""
    path = tmp_path / "steps.json"
    path.write_bytes(orjson.dumps({"traceEvents": _step(1, 1000, 1040, 20) + _step(2, 1200, 1235, 30)}))
    assert read_table(path).meta["runs"] == 2 and read_folded(path).meta["runs"] == 2
    assert main(["analyze", str(path), "--view", "temporal", "--format", "json"]) == 0
    doc = orjson.loads(capsys.readouterr().out)
    rows = doc["rows"] if isinstance(doc, dict) else doc
    steps = [r for r in rows if r["label"] != "whole trace"]
    assert [(r["label"], r["activities"], r["compute_us"]) for r in steps] == \
        [("ProfilerStep#1", 1, 20.0), ("ProfilerStep#2", 1, 30.0)]
    # the annotations view keeps the copy as the step's GPU range
    assert main(["analyze", str(path), "--view", "annotations", "--format", "json"]) == 0
    doc = orjson.loads(capsys.readouterr().out)
    rows = doc["rows"] if isinstance(doc, dict) else doc
    assert {r["name"]: (r["cpu_us"], r["gpu_us"]) for r in rows} == {"ProfilerStep#1": (100.0, 20.0),
                                                                       "ProfilerStep#2": (100.0, 30.0)}


def _note(name: str, tid: int, ts: int, dur: int, cat: str = "user_annotation") -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1 if cat == "user_annotation" else 0, "tid": tid, "ts": ts,
            "dur": dur, "args": {}}


def _launch(tid: int, ts: int, corr: int, kernel_ts: int, kernel_us: int) -> list[dict[str, Any]]:
    return [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": tid, "ts": ts, "dur": 1,
             "args": {"correlation": corr}},
            {"ph": "X", "cat": "kernel", "name": f"k{corr}", "pid": 0, "tid": 7, "ts": kernel_ts, "dur": kernel_us,
             "args": {"correlation": corr, "device": 0, "stream": 7}}]


def _annotations_reference(events: list[dict[str, Any]]) -> dict[str, tuple[int, float, int, float, float]]:
    """Per name, from the raw events: CPU ranges, their time, GPU ranges, their time — a range inside an
    earlier-opened range of its name, side and thread (ending by its end, give or take 1 µs) counted once, in
    the outer one — and the device time launched inside its outer CPU ranges by a runtime call of their thread."""
    notes = [(k, e) for k, e in enumerate(events) if e["cat"] in ("user_annotation", "gpu_user_annotation")]
    calls = {e["args"]["correlation"]: e for e in events if e["cat"] == "cuda_runtime"}
    kernels = [e for e in events if e["cat"] == "kernel"]

    def nested(k: int, e: dict[str, Any]) -> bool:
        return any((q["ts"], -q["dur"], j) < (e["ts"], -e["dur"], k) and e["ts"] < q["ts"] + q["dur"]
                   and e["ts"] + e["dur"] <= q["ts"] + q["dur"] + 1
                   and (q["name"], q["cat"], q["pid"], q["tid"]) == (e["name"], e["cat"], e["pid"], e["tid"])
                   for j, q in notes)

    out: dict[str, list[float]] = {}
    for k, e in notes:
        row = out.setdefault(e["name"], [0, 0.0, 0, 0.0, 0.0])
        gpu = e["cat"] == "gpu_user_annotation"
        row[2 if gpu else 0] += 1
        if nested(k, e):
            continue
        row[3 if gpu else 1] += e["dur"]
        if not gpu:
            row[4] += sum(d["dur"] for d in kernels
                          if (c := calls[d["args"]["correlation"]])["tid"] == e["tid"] and c["pid"] == e["pid"]
                          and e["ts"] <= c["ts"] < e["ts"] + e["dur"])
    return {name: (int(r[0]), float(r[1]), int(r[2]), float(r[3]), float(r[4])) for name, r in out.items()}


def _annotation_events(seed: int) -> list[dict[str, Any]]:
    """Two threads recording ranges of two names, nested in one another (the same name too, some ending 1 µs
    past their parent), launching kernels from both, and the ranges' copies on the GPU, nested likewise."""
    r = random.Random(seed)
    events: list[dict[str, Any]] = []
    corr = 0
    for tid in (1, 2):
        t = 0
        for _ in range(12):
            depth = [(t, t + r.randint(40, 200))]
            events.append(_note(r.choice("ab"), tid, *depth[0][:1], depth[0][1] - depth[0][0]))
            while r.random() < 0.7 and depth[-1][1] - depth[-1][0] > 6:
                lo, hi = depth[-1]
                s = r.randint(lo, hi - 3)
                end = min(r.randint(s + 1, hi), hi) + (1 if r.random() < 0.2 else 0)  # a rounding past the end
                depth.append((s, end))
                events.append(_note(r.choice("ab"), tid, s, end - s))
                events.append(_note(events[-1]["name"], 7, s + 5, end - s, "gpu_user_annotation"))
            for _ in range(r.randint(0, 4)):
                corr += 1
                events += _launch(tid, r.randint(t - 10, depth[0][1] + 10), corr, 10_000 + corr * 10, r.randint(1, 9))
            t = depth[0][1] + r.randint(0, 20)
    return events


K6 = [_note("block", 1, 0, 100), _note("block", 1, 10, 50), _note("inner", 1, 15, 20),
      {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": 20, "dur": 10,
       "args": {"External id": 3}},
      *_launch(1, 22, 1, 40, 10), *_launch(1, 70, 2, 80, 4), _note("block", 2, 0, 30)]


@pytest.mark.parametrize("seed", [None, *range(6)], ids=lambda s: "k6" if s is None else f"fuzz{s}")
def test_annotations_count_nested_ranges_once_and_launches_on_their_thread(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], seed: int | None) -> None:
    """A range inside a range of its name on its thread counts once; launches count only under ranges of the
    launching thread: whole, streamed (the CLI) and against the raw events."""
    events = K6 if seed is None else _annotation_events(seed)
    path = tmp_path / "notes.json"
    path.write_bytes(orjson.dumps({"traceEvents": events}))
    want = _annotations_reference(events)
    if seed is None:  # thread 1's outer 100 µs and thread 2's 30; the 14 µs of device time the trace holds
        assert want == {"block": (3, 130.0, 0, 0.0, 14.0), "inner": (1, 20.0, 0, 0.0, 10.0)}
    table = read_table(path)
    got = {a.name: (a.cpu_calls, a.cpu_ns / 1e3, a.gpu_calls, a.gpu_ns / 1e3, (a.launched_device_ns or 0.0) / 1e3)
           for a in annotation_times(table.meta["annotations"], table.meta["kernels"])}
    assert got == want
    assert main(["analyze", str(path), "--view", "annotations", "--format", "json"]) == 0
    rows = orjson.loads(capsys.readouterr().out)["rows"]
    assert {r["name"]: (r["cpu_calls"], r["cpu_us"], r["gpu_calls"], r["gpu_us"], r["launched_device_us"])
            for r in rows} == want


def _csv(capsys: pytest.CaptureFixture[str], path: Path, view: str) -> str:
    assert main(["analyze", str(path), "--view", view, "--format", "csv"]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("view", ["temporal", "idle", "kernel-type", "launch", "queue", "memcpy", "overlap",
                                  "annotations"])
def test_a_view_without_rows_keeps_its_csv_header(capsys: pytest.CaptureFixture[str], view: str) -> None:
    """The CSV header of a view is its rows' keys (the V100 trace has rows in every view), rows or none: the
    H100 trace has no copies and no annotations, a CPU-only trace no device at all (it once printed a bare
    newline)."""
    assert main(["analyze", str(V100), "--view", view, "--format", "json"]) == 0
    header = ",".join(orjson.loads(capsys.readouterr().out)["rows"][0])
    assert _csv(capsys, V100, view).split("\n")[0] == header
    for path in (H100, DATA / "torch_cpu" / "trace.json.gz"):
        out = _csv(capsys, path, view)
        assert out.split("\n")[0] == header, path
        if path != H100 or view in ("memcpy", "annotations"):
            assert out == header + "\n", path  # no rows


def test_a_trace_without_device_says_what_was_dropped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every view's JSON has ``dropped``, a trace without device activity's too (ONNX Runtime's, a CPU-only
    PyTorch one): what the reader left out, as the op table's warnings say."""
    node = {"cat": "Node", "ph": "X", "pid": 1, "tid": 1, "name": "relu_kernel_time", "ts": 0, "dur": 5,
            "args": {"op_name": "Relu", "provider": "CPUExecutionProvider"}}
    ort = _write_json(tmp_path / "ort.json", [node, {**node, "ts": 10, "dur": -1}])
    cpu = _write_json(tmp_path / "cpu.json", {"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": 0, "dur": 10, "args": {}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 20, "dur": -5, "args": {}}]})
    for path, example in ((ort, "relu_kernel_time"), (cpu, "aten::mm")):
        for view in ("idle", "annotations"):
            assert main(["analyze", str(path), "--view", view, "--format", "json"]) == 0
            doc = orjson.loads(capsys.readouterr().out)
            assert doc == {"view": view, "source": str(path), "device": False, "rows": [],
                           "dropped": {"negative duration": {"events": 1, "example": example}}}, (path, view)


def _write_json(path: Path, doc: Any) -> Path:
    path.write_bytes(orjson.dumps(doc))
    return path


def test_a_step_takes_what_every_thread_launched_in_it(tmp_path: Path) -> None:
    """A ProfilerStep is the step: the kernel autograd's thread launched during it is the step's (as in the
    temporal view), while a record_function range on the main thread takes its own thread's launches only."""
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
        {"ph": "X", "cat": "user_annotation", "name": "forward", "pid": 1, "tid": 1, "ts": 5, "dur": 90},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 5,
         "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "fwd", "pid": 0, "tid": 7, "ts": 20, "dur": 10,
         "args": {"correlation": 1, "device": 0, "stream": 7}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": 50, "dur": 5,
         "args": {"correlation": 2}},
        {"ph": "X", "cat": "kernel", "name": "bwd", "pid": 0, "tid": 7, "ts": 60, "dur": 7,
         "args": {"correlation": 2, "device": 0, "stream": 7}}]
    path = tmp_path / "t.json"
    path.write_bytes(orjson.dumps({"traceEvents": events}))
    for table in (read_table(path), read_folded(path, activities=True)):
        kernels = table.meta["kernels"] if "kernels" in table.meta else table.meta["activities"]
        got = {a.name: a.launched_device_ns / 1e3 for a in annotation_times(table.meta["annotations"], kernels)}
        if "activities" in table.meta:
            table.meta["activities"].close()  # its folder of files goes with it
        assert got == {"ProfilerStep#1": 17.0, "forward": 10.0}
