"""The report's second edition, read from the page's markup and data (the browser tests drive the same pages):
a GPU trace rated against its own device, its kernels on their streams, exact selection groups, every
statistic named, counters with units, runs with their warm-up apart, the diff's fused rows paired."""

from __future__ import annotations

import gzip
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from layerperf.analysis.matching import Node, covers, pair_nodes
from layerperf.calibration import device_peaks
from layerperf.calibration.peaks import Peaks
from layerperf.readers.detect import read_table
from layerperf.renderers import html
from layerperf.renderers.html import diffpage, gantt, runs, source
from layerperf.renderers.html.counters import counter_columns
from layerperf.renderers.html.roofline import Ceilings, roofline_svg
from test_report import Dom, _facts, drawn_calls, timeline_of

DATA = Path(__file__).parent / "data"
H100 = DATA / "torch_resnet18_cuda" / "trace.json.gz"  # resnet18, batch 8, on an H100 (its README)
COUNTERS = DATA / "traces_0_1" / "resnet18_counters_memory"  # task-clock and page-faults per layer
CPU_PEAKS = Peaks("Some CPU", 2, flops_per_s={1: 100e9, 2: 200e9}, int_ops_per_s={1: 400e9, 2: 800e9},
                  bytes_per_s={1: 20e9, 2: 30e9}, measured_at="2026-11-24T00:00:00Z")  # test input, not measured


def page_data(page: str) -> dict[str, Any]:
    return orjson.loads(Dom(page).scripts[0][1])


def test_published_peaks_by_the_name_cuda_reports() -> None:
    assert device_peaks.for_name("NVIDIA H100 80GB HBM3").model == "H100 SXM"
    assert device_peaks.for_name("NVIDIA H100 PCIe").model == "H100 PCIe"
    assert device_peaks.for_name("Tesla V100-SXM2-16GB").model == "V100 SXM2"
    assert device_peaks.for_name("NVIDIA A100-SXM4-80GB").model == "A100 80GB SXM"
    assert device_peaks.for_name("Some Other GPU") is None
    device = device_peaks.trace_device(read_table(H100).meta)
    assert device is not None and device.name == "NVIDIA H100 80GB HBM3" and device.peaks is not None


def test_a_cpu_trace_recorded_beside_a_gpu_is_not_rated_against_it(tmp_path: Path) -> None:
    # PyTorch writes deviceProperties whenever the machine has a GPU, even when nothing ran on it
    doc = orjson.loads(gzip.decompress((DATA / "torch_cpu" / "trace.json.gz").read_bytes()))
    doc["deviceProperties"] = [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]
    path = tmp_path / "cpu_beside_gpu.json"
    path.write_bytes(orjson.dumps(doc))
    assert device_peaks.trace_device(read_table(path).meta) is None
    page = html.html(path, peaks=CPU_PEAKS)  # nor against a CPU's: the trace cannot tell where its ops ran
    assert "pct_of_peak" not in page_data(page)["tables"]["layers"]["keys"]
    assert "% of peak not given: the trace names the GPU NVIDIA H100 80GB HBM3 but records no activity" in page
    assert "H100 SXM" not in page  # no published peaks drawn


def test_gpu_trace_is_never_rated_against_a_cpu_calibration() -> None:
    # the CPU calibration given is set aside, said, and the GPU's own published peaks kept (it cost them)
    page = html.html(H100, peaks=CPU_PEAKS)
    assert "the calibration given is of a CPU" in page
    assert "109.84 GFLOP/s" not in page and "does not say which machine" not in page
    assert _facts(page)["device peaks"].startswith("H100 SXM: float32 67.00 TFLOP/s")
    assert 'id="roofline"' in page and "H100 SXM float32" in page
    table = page_data(page)["tables"]["layers"]
    col = {k: i for i, k in enumerate(table["keys"])}
    rated = [r[col["pct_of_peak"]] for r in table["rows"] if r[col["pct_of_peak"]] is not None]
    assert rated and all(v < 100 for v in rated)


def test_gpu_trace_is_rated_against_its_device_over_device_time() -> None:
    page = html.html(H100)  # no calibration given: the named GPU's published peaks
    facts = _facts(page)
    assert facts["machine"] == "NVIDIA H100 80GB HBM3"
    assert facts["device peaks"].startswith("H100 SXM: float32 67.00 TFLOP/s")
    table = page_data(page)["tables"]["layers"]
    col = {k: i for i, k in enumerate(table["keys"])}
    rated = [r for r in table["rows"] if r[col["pct_of_peak"]] is not None]
    assert rated and all(r[col["rate_time"]] == "device" for r in rated)  # CPU-time rows have no % of peak
    assert all(r[col["pct_of_peak"]] < 100 for r in rated)  # the device's own ceiling, not 49,285%
    assert 'id="roofline"' in page and "H100 SXM float32" in page


def test_gpu_trace_draws_kernels_on_their_stream_linked_to_their_op() -> None:
    page = html.html(H100)
    data = timeline_of(Dom(page))
    gpu_lanes = [lane["name"] for lane in data["lanes"] if lane["gpu"]]
    assert gpu_lanes == ["GPU 0 stream 7"]
    kernels = data["parts"][0]["kernels"]
    table = read_table(H100)
    assert len(kernels["t"]) == len(table.meta["kernels"])  # every kernel of the one run
    assert all(s >= 0 or o >= 0 for s, o in zip(kernels["src"], kernels["own"], strict=True))  # each linked
    # the op-type chart ranks device time: its first bar is the convolution, not a CPU-side launch
    bars = re.findall(r'class="bar" data-type="([^"]+)"', page)
    assert bars[0] == "aten::cudnn_convolution" and "cudaLaunchKernel" not in bars
    assert "device time the op type launched itself" in page
    for chart in ("gpu-temporal", "gpu-idle", "gpu-kinds", "gpu-kernels"):
        assert f'id="{chart}"' in page


def test_chart_selection_groups_are_exact_op_types() -> None:
    page = html.html(DATA / "torch_cpu" / "trace.json.gz", peaks=None)
    table = page_data(page)["tables"]["layers"]
    assert table["groups"] == table["types"]  # a bar selects rows whose op type is its own, never a substring
    assert 'data-filter="' not in page


def test_counters_have_units_next_to_the_name_and_totals_in_the_summary() -> None:
    page = html.html(COUNTERS, peaks=None)
    dom = Dom(page)
    headers = re.findall(r'<th data-key="([^"]+)"[^>]*>([^<]*)</th>', page)
    shown = dict(headers)
    assert shown["task-clock"] == "task-clock (CPU time)" and shown["page-faults"] == "page-faults (count)"
    assert not any(k.endswith("_per_flop") for k in shown)  # CPU time or faults per FLOP say nothing
    keys = [k for k, _ in headers]
    assert keys.index("task-clock") < keys.index("flops")  # in view: before the work and rate columns
    facts = _facts(page)
    assert "threads busy on average" in facts["task-clock per run"]
    tracks = timeline_of(dom)["counters"]
    assert [t["label"] for t in tracks] == ["task-clock", "page-faults"]


def test_counter_columns_leave_out_what_says_nothing() -> None:
    rows = [{"task-clock": 10.0, "page-faults": 0, "cycles_per_flop": 0.5, "page-faults_per_flop": 0.0}]
    cols = counter_columns(["task-clock", "page-faults", "cycles_per_flop", "page-faults_per_flop"],
                           ["task-clock", "page-faults", "cycles"], {}, rows)
    assert [c.key for c in cols] == ["task-clock", "cycles_per_flop"]  # zero everywhere or software: left out
    assert cols[0].unit == "time" and cols[1].header == "cycles per FLOP"


def test_statistics_are_named_and_the_spread_shown() -> None:
    page = html.html(COUNTERS, peaks=None)
    shown = dict(re.findall(r'<th data-key="([^"]+)"[^>]*>([^<]*)</th>', page))
    assert shown["median_us"] == "self time (median)"
    assert {"mean_us", "p90_us", "max_us", "spread"} <= set(shown)
    assert "the bars add up to the summed medians" in page  # the op-type chart names its statistic


def test_a_warm_up_run_is_apart_and_outliers_named() -> None:
    durations = [241.8e6, 27.0e6, 27.3e6, 26.9e6, 80.0e6, 27.1e6]
    warmup = runs.warmup_count(durations)
    assert warmup == 1
    assert runs.outlier_runs(durations, warmup) == (4,)
    made = runs.RunSet(tuple(float(sum(durations[:k])) for k in range(6)),
                       tuple(float(sum(durations[:k + 1])) for k in range(6)), (), warmup, (4,), "test")
    assert made.median_ns == pytest.approx(27.1e6) and made.representative in (1, 2, 3, 5)


def test_a_foreign_trace_with_a_slow_first_step_is_not_averaged(tmp_path: Path) -> None:
    events, t = [], 0.0
    for step, scale in enumerate((9.0, 1.0, 1.0, 1.0)):
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1, "tid": 1,
                       "ts": t, "dur": 300 * scale})
        for i in range(3):
            events.append({"ph": "X", "cat": "cpu_op", "name": f"aten::op{i}", "pid": 1, "tid": 1,
                           "ts": t + 1 + i * 90 * scale, "dur": 80 * scale})
        t += 300 * scale + 10
    trace = tmp_path / "steps.json"  # a PyTorch profiler trace of 4 steps (Kineto's categories)
    trace.write_bytes(orjson.dumps({"schemaVersion": 1, "traceEvents": events}))
    facts = _facts(html.html(trace, peaks=None))
    assert "step 1 (2.700 ms) was a warm-up, x9.0 the median of the others" in facts["runs"]
    assert facts["total self time"].startswith("240.0 µs per step (median of 3 steady steps, 1 warm-up step left")


def test_every_call_of_a_5000_op_run_is_held(tmp_path: Path) -> None:
    events = [{"ph": "X", "name": f"/block.{i // 50}/node_{i}", "pid": 1, "tid": 1, "ts": i * 2.0, "dur": 1.5,
               "args": {"op_type": "Relu"}} for i in range(5000)]
    trace = tmp_path / "wide.json"
    trace.write_bytes(orjson.dumps({"traceEvents": events}))
    data = timeline_of(Dom(html.html(trace, peaks=None)))
    assert len(data["parts"]) == 1 and len(data["parts"][0]["calls"]["t"]) == 5000
    assert data["cut"] == 0


def test_runs_beyond_what_the_page_holds_are_listed_not_held(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gantt, "MAX_CALLS", 60)
    rs = runs.RunSet((0.0, 10.0, 20.0, 30.0), (9.0, 19.0, 29.0, 39.0),
                     tuple(np.arange(k * 30, (k + 1) * 30) for k in range(4)), 0, (), "test")
    held = gantt.held_runs(rs)
    assert held.runs[0] == rs.representative and len(held.runs) == 2  # 30 calls a run, 60 at most in all


def test_fused_nodes_are_covered_by_their_fused_counterpart() -> None:
    ort = [Node("conv1_relu_nchwc", "Conv"), Node("layer1.0.relu1_nchwc", "Conv"),
           Node("layer1.0.bn2_nchwc", "Conv"), Node("fc", "Gemm")]
    torch = [Node("conv1", "Conv2d"), Node("bn1", "BatchNorm2d"), Node("relu", "ReLU"),
             Node("layer1.0.conv1", "Conv2d"), Node("layer1.0.bn1", "BatchNorm2d"), Node("layer1.0.relu1", "ReLU"),
             Node("layer1.0.conv2", "Conv2d"), Node("layer1.0.bn2", "BatchNorm2d"), Node("layer1.0.add", "Add"),
             Node("layer1.0.relu2", "ReLU"), Node("layer1.0.softmax", "Softmax"), Node("fc", "Linear")]
    pairing = pair_nodes(ort, torch)
    in_ort, in_torch = covers(ort, torch, pairing)
    assert in_torch == {}
    named = {torch[j].name: ort[i].name for j, i in in_ort.items()}
    assert named == {"bn1": "conv1_relu_nchwc", "relu": "conv1_relu_nchwc",
                     "layer1.0.bn1": "layer1.0.relu1_nchwc", "layer1.0.relu1": "layer1.0.relu1_nchwc",
                     "layer1.0.bn2": "layer1.0.bn2_nchwc", "layer1.0.add": "layer1.0.bn2_nchwc",
                     "layer1.0.relu2": "layer1.0.bn2_nchwc"}  # the Softmax is not fusible: only in B


def test_diff_headline_is_what_the_cards_and_the_table_say(tmp_path: Path) -> None:
    events_a, events_b, t = [], [], 0.0
    for _ in range(3):
        for name, dur in (("conv", 40.0), ("relu", 10.0)):
            events_a.append({"ph": "X", "name": name, "pid": 1, "tid": 1, "ts": t, "dur": dur,
                             "args": {"op_type": name.title()}})
            events_b.append({**events_a[-1], "dur": dur * 2})
            t += 100
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_bytes(orjson.dumps({"traceEvents": events_a}))
    b.write_bytes(orjson.dumps({"traceEvents": events_b}))
    page = html.html(a, b)
    pairs = re.findall(r"<dt>([^<]*)</dt><dd>([^<]*)</dd>", page)
    cards = [v for k, v in pairs if k.startswith("compared here")]
    facts = dict(pairs)
    assert cards == [facts["A, total"], facts["B, total"]] == ["50.0 µs", "100.0 µs"]
    assert facts["speedup A / B"].startswith("x0.500")
    assert "the mean of its calls" in facts["compared"]


def test_a_module_around_others_only_in_one_trace_says_so(tmp_path: Path) -> None:
    def trace(path: Path, names: list[str]) -> Path:
        path.write_bytes(orjson.dumps({"traceEvents": [
            {"ph": "X", "name": n, "pid": 1, "tid": 1, "ts": i * 10.0, "dur": 5.0, "args": {"op_type": "Conv"}}
            for i, n in enumerate(names)]}))
        return path

    a = trace(tmp_path / "a.json", ["block.conv", "head"])
    b = trace(tmp_path / "b.json", ["block", "block.conv", "head", "extra"])
    assert diffpage.modules_around_others(source.of(b)) == {"block"}
    page = html.html(a, b)
    facts = dict(re.findall(r"<dt>([^<]*)</dt><dd>([^<]*)</dd>", page))
    assert facts["nodes"] == "0 only in A, 2 only in B (1 module around others, which the other side does not run)"
    assert ">B (module)<" in page and ">B<" in page  # extra: only in B, no module


def test_timeline_nests_calls_and_keeps_threads_apart(tmp_path: Path) -> None:
    """Two runs of a parent holding a child holding a grandchild, a sibling after, and a call on another
    thread: one run drawn, a lane per thread, each nested call one bar height below its parent."""
    events = []
    for run in range(2):
        t = run * 1000.0
        events += [{"ph": "X", "name": n, "pid": 1, "tid": tid, "ts": t + a, "dur": d, "args": {"op_type": op}}
                   for n, op, tid, a, d in (("loop", "Loop", 1, 0, 100), ("body", "MatMul", 1, 10, 40),
                                            ("inner", "Add", 1, 20, 10), ("after", "Relu", 1, 60, 30),
                                            ("worker", "Conv", 2, 5, 50))]
    trace = tmp_path / "nested.json"
    trace.write_bytes(orjson.dumps({"traceEvents": events}))
    page = html.html(trace, peaks=None)
    calls = drawn_calls(Dom(page))
    by_name = {c["name"]: c for c in calls}
    assert sorted(by_name) == ["after", "body", "inner", "loop", "worker"]  # one run of the two
    assert [by_name[n]["depth"] for n in ("loop", "body", "inner", "after")] == [0, 1, 2, 1]  # a level per nesting
    assert by_name["worker"]["depth"] == 0 and by_name["worker"]["lane"] != by_name["loop"]["lane"]
    assert {c["lane"] for c in calls} == {"thread 1", "thread 2"}
    assert by_name["inner"]["start"] == 20_000 and by_name["inner"]["dur"] == 10_000  # ns after the run's start
    assert "run 1 drawn" in page or "run 2 drawn" in page


def test_kernel_short_names_keep_what_a_generic_kernel_applies() -> None:
    from layerperf.renderers.html.draw import short_kernel

    fill = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
            "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)")
    assert short_kernel(fill) == "at::native::vectorized_elementwise_kernel (FillFunctor)"
    assert short_kernel("cudnn::bn_fw_inf_1C11_kernel_NCHW<float, float, int, 512, true, 1, true>(float, float)") \
        == "cudnn::bn_fw_inf_1C11_kernel_NCHW"
    assert short_kernel("Memcpy HtoD (Pageable -> Device)") == "Memcpy HtoD (Pageable -> Device)"
    data = timeline_of(Dom(html.html(H100)))
    assert len(data["kshort"]) == len(data["knames"]) and "at::native::reduce_kernel (MeanOps)" in data["kshort"]


def test_roofline_names_a_quick_calibration_as_quick() -> None:
    for quick, word in ((False, "(calibrated)"), (True, "(quick calibrated)")):
        ceilings = Ceilings.of(replace(CPU_PEAKS, quick=quick), 1)
        assert ceilings is not None
        svg = roofline_svg([], {}, ceilings)
        assert word in svg and ("quick" in svg) == quick


def test_the_time_split_draws_a_few_steps_of_a_long_trace() -> None:
    # a bar per ProfilerStep of a 1,250-step trace was a chart 42,000 px tall: the whole trace and the
    # steps with the largest idle share, in step order
    from layerperf.renderers.html.gpu import TOP_STEPS, temporal_svg

    table = read_table(H100)
    kernels = table.meta["kernels"]
    lo, hi = float(kernels.ts_ns.min()), float((kernels.ts_ns + kernels.dur_ns).max())
    edges = np.linspace(lo, hi, 41)
    table.meta["run_windows_ns"] = [(float(a), float(b)) for a, b in zip(edges[:-1], edges[1:], strict=True)]
    svg = temporal_svg(kernels, table)
    labels = re.findall(r'data-part="compute"[^>]*>\s*<title>([^:]+):', svg) or re.findall(
        r'<title>([^:<]+): compute', svg)
    assert len(labels) == 1 + TOP_STEPS, labels
    assert f"the {TOP_STEPS} of its 40 steps with the largest idle share" in svg
    steps = [int(x.split("#")[-1]) if "#" in x else int(x.split()[-1]) for x in labels[1:]]
    assert steps == sorted(steps)
