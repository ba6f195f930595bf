"""Readers on real files from each producer, and on constructed traces where a case needs exact numbers."""

from __future__ import annotations

import gzip
import math
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import orjson
import pytest

import layerperf
from layerperf.analysis.aggregate import aggregate, rows
from layerperf.errors import InputError
from layerperf.readers.detect import read_folded, read_table
from layerperf.readers.stream import open_events

DATA = Path(__file__).parent / "data"
SHIPPED_TORCH = DATA / "torch_cpu" / "trace.json.gz"  # torch 2.13.0 CPU, tiny conv net, 2 forward passes


def _write(path: Path, doc: Any) -> Path:
    path.write_bytes(orjson.dumps(doc))
    return path


def _by_name(table: Any) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in rows(aggregate(table, "name", "sum"))}


@pytest.fixture(scope="module")
def ort_profile(tiny_model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real ONNX Runtime profile of the tiny CNN: 4 runs."""
    opts = ort.SessionOptions()
    opts.enable_profiling = True
    opts.profile_file_prefix = str(tmp_path_factory.mktemp("ort") / "onnxruntime_profile")
    sess = ort.InferenceSession(str(tiny_model_path), opts, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)
    for _ in range(4):
        sess.run(None, {"input": x})
    return Path(sess.end_profiling())


@pytest.fixture(scope="module")
def layerperf_dir(tiny_model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("lp")
    layerperf.save(layerperf.profile(str(tiny_model_path), runs=3, warmup=1, latency=False), out)
    return out


def test_ort_profile(ort_profile: Path) -> None:
    doc = orjson.loads(ort_profile.read_bytes())
    kernels = [e for e in doc if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    table = read_table(ort_profile)
    assert table.meta["format"] == "ort"
    assert table.meta["runs"] == 4
    assert len(table) == len(kernels)
    assert table.dur_ns.sum() == pytest.approx(sum(e["dur"] for e in kernels) * 1e3)
    nodes = _by_name(table)
    assert all(r["calls"] == 4 for r in nodes.values())
    recorded = {e["name"].removesuffix("_kernel_time"): e["args"] for e in kernels}
    conv_name, conv = next((k, r) for k, r in nodes.items() if r["op_type"] == "Conv")
    # Expectations from the shapes ONNX Runtime recorded (which layout it chose, and how many
    # channels it padded to, is its business): 2 * N*Cout*H*W * Cin/group*kh*kw + one bias add
    # per output element, every tensor read and written once, float32
    x, w, b = (next(iter(d.values())) for d in recorded[conv_name]["input_type_shape"])
    (y,) = (next(iter(d.values())) for d in recorded[conv_name]["output_type_shape"])
    assert (w[1:], b, y[2:]) == ([3, 3, 3], [w[0]], [16, 16])  # the tiny CNN's 3x3 Conv on 3 channels
    out_elems = math.prod(y)
    assert conv["flops"] == 4 * (2 * out_elems * math.prod(w[1:]) + out_elems)
    assert conv["int_ops"] == 0  # float work only
    assert conv["in_shapes"] == ";".join("x".join(map(str, d)) for d in (x, w, b))
    assert conv["bytes"] == 4 * 4 * sum(math.prod(d) for d in (x, w, b, y))
    pool_name, pool = next((k, r) for k, r in nodes.items() if r["op_type"] == "MaxPool")
    assert pool["flops"] is None  # its kernel size is an attribute the profile lacks: unknown, not 0
    (pool_in,) = (next(iter(d.values())) for d in recorded[pool_name]["input_type_shape"])
    (pool_out,) = (next(iter(d.values())) for d in recorded[pool_name]["output_type_shape"])
    assert pool_out[2:] == [s // 2 for s in pool_in[2:]]
    assert pool["bytes"] == 4 * 4 * (math.prod(pool_in) + math.prod(pool_out))


def test_ort_fences_are_skipped(tmp_path: Path) -> None:
    def ev(name: str, ts: int, dur: int) -> dict[str, Any]:
        return {"cat": "Node", "ph": "X", "pid": 1, "tid": 1, "name": name, "ts": ts, "dur": dur,
                "args": {"op_name": "Relu", "provider": "CPUExecutionProvider",
                         "input_type_shape": [{"float": [2, 3]}], "output_type_shape": [{"float": [2, 3]}]}}

    doc = [{"cat": "Session", "ph": "X", "pid": 1, "tid": 1, "name": "model_run", "ts": 0, "dur": 20, "args": {}},
           ev("relu_fence_before", 1, 0), ev("relu_kernel_time", 1, 7), ev("relu_fence_after", 8, 0)]
    table = read_table(_write(tmp_path / "p.json", doc))
    (row,) = rows(table)
    assert (row["name"], row["time_us"], row["flops"], row["bytes"]) == ("relu", 7.0, 6.0, 48.0)


@pytest.mark.parametrize("cat", ["Node", "node"])
@pytest.mark.parametrize("wrapped", [False, True], ids=["array", "object"])
def test_plain_trace_of_node_events_is_no_ort_profile(tmp_path: Path, cat: str, wrapped: bool) -> None:
    """Events that only share ONNX Runtime's category name read as the plain trace they are."""
    events = [{"cat": cat, "ph": "X", "name": "layout", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
              {"cat": cat, "ph": "X", "name": "paint", "pid": 1, "tid": 1, "ts": 20, "dur": 5}]
    path = _write(tmp_path / "t.json", {"traceEvents": events} if wrapped else events)
    table = read_table(path)
    assert table.meta["format"] == "tef"
    assert {n: r["time_us"] for n, r in _by_name(table).items()} == {"layout": 10.0, "paint": 5.0}
    folded = read_folded(path)  # streamed, as analyze reads it
    assert folded.meta["format"] == "tef"
    assert {r["name"]: r["time_us"] for r in rows(folded.table("name", "sum"))} == {"layout": 10.0, "paint": 5.0}


def test_ort_profile_told_by_content(ort_profile: Path, tmp_path: Path) -> None:
    """A real profile is ONNX Runtime's as an array or wrapped in an object, and when its first chunk holds
    only its Session events (read in small blocks); a Session-only start is ONNX Runtime's by their names."""
    doc = orjson.loads(ort_profile.read_bytes())
    kernels = [e for e in doc if e["cat"] == "Node" and e["name"].endswith("_kernel_time")]
    want = sum(e["dur"] for e in kernels)
    wrapped = _write(tmp_path / "wrapped.json", {"traceEvents": doc})
    block = next(b for b in (64, 128, 256, 512)
                 if {ev.cat for ev in open_events(ort_profile, block=b).first} == {"Session"})
    for path, size in ((ort_profile, None), (wrapped, None), (ort_profile, block), (wrapped, block)):
        table = read_table(path) if size is None else read_table(path, block=size)
        assert table.meta["format"] == "ort" and len(table) == len(kernels), (path, size)
        assert table.dur_ns.sum() == pytest.approx(want * 1e3)
    # the node events alone (no Session events), and a profile's start alone
    assert read_table(_write(tmp_path / "nodes.json", kernels)).meta["format"] == "ort"
    session = [e for e in doc if e["cat"] == "Session"]
    assert {e["name"] for e in session} >= {"model_loading_uri", "session_initialization", "model_run"}
    with pytest.raises(InputError, match=r"\(ort trace with"):  # told by the Session events' names: no node
        read_table(_write(tmp_path / "s.json", session))


def test_layerperf_trace(layerperf_dir: Path) -> None:
    prof = layerperf.load(layerperf_dir / "trace.json")
    table = read_table(layerperf_dir)  # the directory stands for its trace.json
    assert table.meta["format"] == "layerperf"
    nodes = _by_name(table)
    assert set(nodes) == {layer.name for layer in prof.layers}
    for i, layer in enumerate(prof.layers):
        row = nodes[layer.name]
        assert row["calls"] == prof.durations_ns(i).size == 3
        assert row["time_us"] == pytest.approx(prof.durations_ns(i).sum() / 1e3)
        assert row["flops"] == (None if layer.flops is None else 3 * layer.flops)
    # read in small blocks, its otherData (written after the events) is met only at the end
    small = read_table(layerperf_dir / "trace.json", block=512)
    assert small.meta["format"] == "layerperf" and _by_name(small) == nodes


def _check_torch(table: Any) -> None:
    assert table.meta["format"] == "kineto"
    nodes = _by_name(table)
    conv = nodes["aten::conv2d"]
    assert conv["in_shapes"].startswith("1x3x16x16;8x3x3x3;8")
    assert conv["calls"] == 2
    # conv2d only dispatches: nearly all of its time is in the ops nested inside it
    assert conv["incl_us"] > conv["time_us"]
    assert all(r["time_us"] <= r["incl_us"] + 1e-6 for r in nodes.values())
    assert all(r["flops"] is None or r["flops"] > 0 for r in nodes.values())
    # Linear(512, 10) on one row: FLOPs from its Input Dims, a Gemm with bias, on the op the user called
    # (aten::linear), rated over its inclusive time (the work runs in the aten::addmm inside it)
    linear = nodes["aten::linear"]
    assert linear["flops"] == linear["calls"] * (2 * 512 * 10 + 10)
    assert linear["flops_per_s"] == pytest.approx(linear["flops"] / (linear["incl_us"] * 1e-6))
    assert linear["bytes"] == linear["calls"] * 4 * (512 + 10 * 512 + 10 + 10)  # x, W, b read; y written
    assert nodes["aten::addmm"]["flops"] is None  # the linear's work: not counted twice
    # Conv2d(3, 8, 3, padding=1) on 1x3x16x16: 2 FLOPs a multiply-add, one add a bias element
    out = 8 * 16 * 16
    assert conv["flops"] == conv["calls"] * (2 * out * 3 * 9 + out)
    assert all(nodes[n]["flops"] is None for n in ("aten::convolution", "aten::_convolution") if n in nodes)


def test_torch_shipped_trace() -> None:
    _check_torch(read_table(SHIPPED_TORCH))


def test_torch_trace_made_now(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch", reason="torch is not installed (the shipped trace covers this reader)")
    from torch.profiler import ProfilerActivity, profile

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                torch.nn.Flatten(), torch.nn.Linear(512, 10)).eval()
    x = torch.randn(1, 3, 16, 16)
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(2):
            model(x)
    path = tmp_path / "torch.json"
    prof.export_chrome_trace(str(path))
    _check_torch(read_table(path))


def test_torch_trace_flops_match_torchs_flop_counter(tmp_path: Path) -> None:
    """A CNN's conv2d (strided, padded, dilated, grouped) and linear FLOPs, derived from the trace's Input
    Dims and Concrete Inputs, equal torch.utils.flop_counter's count of the same forward plus the bias
    adds it leaves out (one per output element); each call counted once, on the op the user called."""
    torch = pytest.importorskip("torch", reason="torch is not installed")
    from torch.profiler import ProfilerActivity, profile
    from torch.utils.flop_counter import FlopCounterMode

    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(8, 16, 3, padding=2, dilation=2, groups=2, bias=False), torch.nn.Flatten(),
        torch.nn.Linear(16 * 8 * 8, 10)).eval()
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(x)
    bias_adds = 2 * 8 * 8 * 8 + 2 * 10  # the first conv's and the linear's outputs
    runs = 3
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_flops=True) as prof:
        for _ in range(runs):
            model(x)
    path = tmp_path / "cnn.json"
    prof.export_chrome_trace(str(path))
    table = read_table(path)
    assert np.nansum(table.flops) == runs * (counter.get_total_flops() + bias_adds)
    nodes = _by_name(table)
    assert {n for n, r in nodes.items() if r["flops"] is not None} == {"aten::conv2d", "aten::linear"}
    # bytes from the recorded dims and types: the roofline gets a point per such op
    conv_bytes = 4 * ((2 * 3 * 16 * 16 + 8 * 3 * 9 + 8 + 2 * 8 * 8 * 8) + (2 * 8 * 8 * 8 + 16 * 4 * 9 + 2 * 16 * 8 * 8))
    assert nodes["aten::conv2d"]["bytes"] == runs * conv_bytes
    assert nodes["aten::conv2d"]["flops_per_s"] > 0 and nodes["aten::conv2d"]["bytes_per_s"] > 0


def test_kineto_gpu_kernels_link_to_ops(tmp_path: Path) -> None:
    # Constructed, not recorded (no GPU here): Kineto's documented shape. aten::mm launches one kernel
    # through cudaLaunchKernel (correlation 7, External id 1 on the op); aten::relu's kernel carries only
    # the correlation id of its launch, which sits inside the op on the CPU thread.
    def x(cat: str, name: str, ts: float, dur: float, tid: int, **args: Any) -> dict[str, Any]:
        return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}

    events = [
        x("cpu_op", "aten::mm", 0, 10, 1, **{"External id": 1, "Input Dims": [[4, 8], [8, 16]]}),
        x("cuda_runtime", "cudaLaunchKernel", 2, 3, 1, correlation=7, **{"External id": 1}),
        x("kernel", "gemm_kernel", 20, 40, 7, correlation=7, device=0, **{"External id": 1}),
        x("cpu_op", "aten::relu", 12, 6, 1, **{"External id": 2}),
        x("cuda_runtime", "cudaLaunchKernel", 13, 2, 1, correlation=9),
        x("kernel", "relu_kernel", 61, 5, 7, correlation=9, device=0),
        x("kernel", "orphan_kernel", 70, 1.5, 7, correlation=99, device=0),
    ]
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "constructed"}], "traceEvents": events}
    table = read_table(_write(tmp_path / "k.json", doc))
    nodes = _by_name(table)
    assert nodes["aten::mm"]["device_us"] == 40.0
    assert nodes["aten::mm"]["time_us"] == 7.0  # 10 minus the 3 of the launch inside it
    assert nodes["aten::relu"]["device_us"] == 5.0
    assert nodes["orphan_kernel"]["device_us"] == 1.5  # linked to nothing: a row of its own
    assert nodes["aten::mm"]["in_shapes"] == "4x8;8x16"


def test_tef_nesting_and_begin_end(tmp_path: Path) -> None:
    events = [
        {"ph": "X", "name": "outer", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
        {"ph": "X", "name": "inner", "pid": 1, "tid": 1, "ts": 10, "dur": 30},
        {"ph": "B", "name": "be", "pid": 1, "tid": 1, "ts": 50, "args": {"op_type": "Custom"}},
        {"ph": "E", "pid": 1, "tid": 1, "ts": 70},
        {"ph": "X", "name": "other_thread", "pid": 1, "tid": 2, "ts": 5, "dur": 50},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}},
        {"ph": "C", "name": "counter", "pid": 1, "ts": 1, "args": {"v": 3}},
    ]
    table = read_table(_write(tmp_path / "t.json", {"traceEvents": events}))
    nodes = _by_name(table)
    assert nodes["outer"]["time_us"] == 100 - 30 - 20
    assert nodes["outer"]["incl_us"] == 100
    assert nodes["inner"]["time_us"] == 30
    assert nodes["be"]["time_us"] == 20
    assert nodes["be"]["op_type"] == "Custom"
    assert nodes["other_thread"]["time_us"] == 50
    assert nodes["inner"]["flops"] is None


@pytest.mark.parametrize("end", [b"", b",", b",\n  "])
def test_an_events_array_without_its_closing_bracket_reads_to_its_last_event(tmp_path: Path, end: bytes) -> None:
    # the Trace Event Format lets the array's ] be left out (a process that stopped writing): Chrome and
    # Perfetto read such a file; a file cut inside an event, or an object left open, is still truncated
    from layerperf.errors import InputError

    events = [{"ph": "X", "name": f"n{i % 5}", "pid": 1, "tid": 1, "ts": 10.0 * i, "dur": 4.0} for i in range(300)]
    whole = orjson.dumps(events)
    open_ = tmp_path / "open.json"
    open_.write_bytes(whole[:-1] + end)
    want = rows(aggregate(read_table(_write(tmp_path / "closed.json", events)), "name"))
    for block in (None, 64, 4096):
        got = read_table(open_) if block is None else read_table(open_, block=block)
        assert rows(aggregate(got, "name")) == want
    cut = tmp_path / "cut.json"
    cut.write_bytes(whole[:len(whole) // 2])
    obj = tmp_path / "obj.json"
    obj.write_bytes(b'{"traceEvents":' + whole[:-1])
    for path in (cut, obj):
        for block in (None, 64):
            with pytest.raises(InputError, match="is truncated"):
                read_table(path) if block is None else read_table(path, block=block)


def test_a_tie_between_a_pair_and_an_event_nests_alike_read_whole_or_in_chunks(tmp_path: Path) -> None:
    # a B/E pair and an X event of the same start and length: a pair's row is where it closes, in whatever
    # chunk that is, so the X event holds it however the file is cut (a rule that put the pair where it
    # opened within a chunk only gave another answer once the E fell in a later chunk)
    events = [{"ph": "B", "name": "outer", "pid": 1, "tid": 1, "ts": 0},
              {"ph": "X", "name": "inner", "pid": 1, "tid": 1, "ts": 0, "dur": 100}]
    events += [{"ph": "X", "name": f"other{i % 3}", "pid": 1, "tid": 2, "ts": i * 10, "dur": 5} for i in range(200)]
    events += [{"ph": "E", "pid": 1, "tid": 1, "ts": 100}]
    path = _write(tmp_path / "t.json", events)
    for block in (None, 256, 4096):
        nodes = _by_name(read_table(path) if block is None else read_table(path, block=block))
        assert (nodes["inner"]["time_us"], nodes["outer"]["time_us"]) == (0, 100), block


def test_a_name_or_provider_that_is_no_string_reads_as_its_json(tmp_path: Path) -> None:
    path = tmp_path / "odd.json"
    path.write_bytes(orjson.dumps([{"name": {"a": 1}, "ph": "X", "ts": 1, "dur": 2, "pid": 1, "tid": 1,
                                    "args": {"provider": [1]}}]))
    table = read_table(path)
    assert table.labels("name").tolist() == ['{"a":1}'] and table.labels("provider").tolist() == ["[1]"]


def test_chunked_reading_matches_whole(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    events = [{"ph": "X", "name": f"n{i % 13}", "cat": "op", "pid": 1, "tid": int(i % 3), "ts": float(i * 10),
               "dur": float(rng.integers(1, 9)), "args": {"note": "},{\"ph\"" if i % 5 == 0 else [i]}}
              for i in range(3000)]
    plain = _write(tmp_path / "t.json", {"otherData": {"x": 1}, "traceEvents": events, "tail": [1, 2]})
    zipped = tmp_path / "t.json.gz"
    zipped.write_bytes(gzip.compress(plain.read_bytes()))
    whole = rows(aggregate(read_table(plain), "name"))
    for path, block in ((plain, 4096), (zipped, 1000), (plain, 64)):
        assert rows(aggregate(read_table(path, block=block), "name")) == whole
    assert sum(r["calls"] for r in whole) == 3000
    assert math.isclose(sum(r["time_us"] for r in whole), sum(e["dur"] for e in events))


def _split_trace(n: int, middle_args: Any = None) -> dict[str, Any]:
    """X events on three threads with nesting, and a B/E pair on thread 9 spanning the whole file."""
    rng = np.random.default_rng(2)
    events: list[dict[str, Any]] = [{"ph": "B", "name": "span", "pid": 1, "tid": 9, "ts": 0,
                                     "args": {"op_type": "Span"}}]
    for i in range(n):
        events.append({"ph": "X", "name": f"n{i % 7}", "cat": "op", "pid": 1, "tid": i % 3, "ts": 100.0 * i,
                       "dur": float(rng.integers(20, 90)), "args": {"in_shapes": [[1, i % 2 + 1]]}})
        if i % 4 == 0:  # a child inside the event just added
            events.append({"ph": "X", "name": "child", "pid": 1, "tid": i % 3, "ts": 100.0 * i + 1, "dur": 5.0})
        if i == n // 2 and middle_args is not None:
            events[-1]["args"] = middle_args
    events.append({"ph": "E", "pid": 1, "tid": 9, "ts": 100.0 * n})
    return {"traceEvents": events, "otherData": {"note": "tail"}}


def test_reading_in_two_processes_matches_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from layerperf.readers import parallel

    path = _write(tmp_path / "t.json", _split_trace(4000))
    one = read_table(path, block=1 << 16)  # a block of its own: read in this process only
    monkeypatch.setattr(parallel, "MIN_BYTES", 0)
    two = read_table(path)
    assert two.meta.get("processes") == 2 and "processes" not in one.meta
    for by in ("name", "shape"):
        assert rows(aggregate(two, by)) == rows(aggregate(one, by))
    nodes = _by_name(two)
    assert nodes["span"]["time_us"] == 100.0 * 4000  # its B and E are read by different processes
    assert nodes["child"]["calls"] == 1000
    # and an ONNX Runtime profile, whose reader splits the same way
    ort_two = read_table(_write(tmp_path / "ort.json", [
        {"cat": "Node", "ph": "X", "name": f"n{i % 5}_kernel_time", "pid": 1, "tid": 1, "ts": i * 10, "dur": 3,
         "args": {"op_name": "Relu", "provider": "CPUExecutionProvider",
                  "input_type_shape": [{"float": [1, 8]}], "output_type_shape": [{"float": [1, 8]}]}}
        for i in range(3000)]))
    assert ort_two.meta["format"] == "ort" and ort_two.meta.get("processes") == 2
    assert rows(aggregate(ort_two, "name")) == rows(aggregate(read_table(tmp_path / "ort.json", block=1 << 16),
                                                                "name"))


def test_a_wrong_cut_falls_back_to_one_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The middle of the file is inside one event's args: a long list of objects that start like the
    # events do, so the cut lands inside it; the stretch before the cut then does not parse.
    from layerperf.readers import parallel

    nested = {"items": [{"ph": "X", "k": i} for i in range(20000)]}
    path = _write(tmp_path / "t.json", _split_trace(400, middle_args=nested))
    monkeypatch.setattr(parallel, "MIN_BYTES", 0)
    table = read_table(path)
    assert "processes" not in table.meta
    assert rows(aggregate(table, "name")) == rows(aggregate(read_table(path, block=1 << 16), "name"))


def test_error_position_far_into_a_file_read_in_blocks(tmp_path: Path) -> None:
    from layerperf.errors import InputError

    lines = [b'{"traceEvents": ['] + [b'{"ph": "X", "name": "n", "pid": 1, "tid": 1, "ts": %d, "dur": 1},' % i
                                      for i in range(500)]
    lines[300] = b'{"ph": "X", "name": "n", "pid": 1, "tid": 1, "ts": 300, "dur": 1 oops},'
    lines.append(b'{"ph": "X", "name": "n", "pid": 1, "tid": 1, "ts": 9999, "dur": 1}]}')
    path = tmp_path / "t.json"
    path.write_bytes(b"\n".join(lines))
    for block in (64, 4096, 1 << 20):
        with pytest.raises(InputError, match=r"line 301, column 6[0-9]\b"):
            read_table(path, block=block)


def test_events_like_layerperfs_without_its_metadata_read_as_tef(tmp_path: Path) -> None:
    events = [{"ph": "X", "cat": "layer", "name": "a", "pid": 1, "tid": 1, "ts": 10 * i, "dur": 4,
               "args": {"layer": 0, "op_type": "Relu"}} for i in range(3)]
    table = read_table(_write(tmp_path / "t.json", {"traceEvents": events, "otherData": {"tool": "other"}}))
    assert table.meta["format"] == "tef"
    assert _by_name(table)["a"]["calls"] == 3 and _by_name(table)["a"]["op_type"] == "Relu"


def test_aten_cost_from_recorded_inputs() -> None:
    """conv2d's FLOPs and bytes from dims, types and concrete inputs; what the formula does not cover is NaN."""
    from layerperf.cost.aten import recorded

    def cost(name: str, dims: Any, types: Any, concrete: Any) -> tuple[float, float]:
        c = recorded.cost(name, orjson.dumps(dims), orjson.dumps(types), orjson.dumps(concrete))
        return (math.nan if c.flops is None else c.flops), (math.nan if c.bytes is None else c.bytes)

    dims = [[1, 4, 8, 8], [6, 2, 3, 3], [], [], [], [], []]  # groups 2, no bias; stride 2, pad 1: 4x4 out
    flops, moved = cost("aten::conv2d", dims, ["c10::Half", "c10::Half", "", "ScalarList", "ScalarList",
                                               "ScalarList", "Scalar"], ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "2"])
    assert flops == 2 * (6 * 4 * 4) * (2 * 9)
    assert moved == 2 * (4 * 64 + 6 * 2 * 9 + 6 * 16)  # float16: 2 bytes an element
    assert math.isnan(cost("aten::conv2d", dims, [], ["", "", "", "[1, 1]", "same", "[1, 1]", "2"])[0])
    transposed = ["", "", "", "[1, 1]", "[0, 0]", "[1, 1]", "True", "[0, 0]", "1"]
    assert math.isnan(cost("aten::convolution", [[1, 4, 8, 8], [4, 2, 3, 3]], [], transposed)[0])
    # linear on a [batch, seq, hidden] input: a Gemm over batch * seq rows, with the bias's adds
    flops, moved = cost("aten::linear", [[2, 5, 8], [3, 8], [3]], ["float", "float", "float"], ["", "", ""])
    assert flops == 2 * 10 * 8 * 3 + 10 * 3 and moved == 4 * (80 + 24 + 3 + 30)
    assert math.isnan(cost("aten::relu", [[2, 3]], ["float"], [""])[0])  # no formula here


def test_a_byte_order_mark_before_the_trace_is_no_part_of_it(tmp_path: Path) -> None:
    events = [{"ph": "X", "name": f"n{i % 3}", "pid": 1, "tid": 1, "ts": 10.0 * i, "dur": 4.0} for i in range(500)]
    plain = _write(tmp_path / "plain.json", {"traceEvents": events})
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    zipped = tmp_path / "bom.json.gz"
    zipped.write_bytes(gzip.compress(bom.read_bytes()))
    want = rows(aggregate(read_table(plain), "name"))
    for path, block in ((bom, None), (bom, 64), (zipped, None), (zipped, 256)):
        got = read_table(path) if block is None else read_table(path, block=block)
        assert rows(aggregate(got, "name")) == want
