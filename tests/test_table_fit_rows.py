"""What a new user met in tables that fit the terminal: rows without a name, names shortened alike,
quantized models losing their integer columns, counters asked for dropped first, titles padded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from rich.cells import cell_len

import layerperf
from layerperf.analysis.summary import summary, work_line
from layerperf.cli import main
from layerperf.data.metadata import Metadata, ModelInfo
from layerperf.data.profile import Layer, Profile, Run, Span
from layerperf.models import zoo
from layerperf.readers.detect import read_table
from layerperf.renderers import terminal
from layerperf.renderers.distinct import distinct
from layerperf.renderers.fit import Layout
from layerperf.renderers.views.columns import counter_columns
from layerperf.renderers.views.diff import diff_view
from layerperf.renderers.views.memory import summary_lines
from layerperf.renderers.views.profile import profile_view
from test_table_fit import SAVED, legible, rows_of

US = 1000
BERT = ["encoder.layer.1.output.dense/MatMulAddFusion", "encoder.layer.4.intermediate.dense/MatMulAddFusion",
        "encoder.layer.5.output.dense/MatMulAddFusion", "encoder.layer.2.intermediate.dense/MatMulAddFusion",
        "encoder.layer.2.output.dense/MatMulAddFusion", "encoder.layer.1.intermediate.dense/MatMulAddFusion",
        "encoder.layer.11.intermediate.dense/MatMulAddFusion", "encoder.layer.10.output.dense/MatMulAddFusion"]
STAGES = "/model/encoder/stages"  # Hugging Face resnet-50's ONNX export, as ONNX Runtime names its NCHWc Convs
RESNET50 = [f"{STAGES}.0/layers.2/layer/layer.2/convolution/Conv_output_0_nchwc",
            f"{STAGES}.2/layers.1/layer/layer.1/activation/Relu_output_0_nchwc",
            f"{STAGES}.2/layers.0/layer/layer.1/activation/Relu_output_0_nchwc",
            f"{STAGES}.1/layers.1/layer/layer.1/activation/Relu_output_0_nchwc",
            f"{STAGES}.1/layers.0/layer/layer.2/convolution/Conv_output_0_nchwc",
            f"{STAGES}.2/layers.0/shortcut/convolution/Conv_output_0_nchwc",
            f"{STAGES}.0/layers.1/layer/layer.0/activation/Relu_output_0_nchwc",
            "/model/embedder/embedder/activation/Relu_output_0_nchwc"]


def _trace(path: Path, nodes: list[tuple[str, str, float]]) -> Path:
    events = [{"ph": "X", "name": name, "pid": 1, "tid": 1, "ts": i * 100.0, "dur": dur, "args": {"op_type": op}}
              for i, (name, op, dur) in enumerate(nodes)]
    path.write_bytes(orjson.dumps({"traceEvents": events}))
    return path


@pytest.mark.parametrize("by", ["name", "type"])
def test_a_row_only_in_b_shows_bs_name_where_name_in_b_is_left_out(tmp_path: Path, by: str) -> None:
    a = _trace(tmp_path / "a.json", [("encoder.layer.0.attention.self.query_nchwc", "Conv", 40.0)])
    b = _trace(tmp_path / "b.json", [("encoder.layer.0.attention.self.query", "Linear", 20.0),
                                     ("encoder.layer.0.attention.output.LayerNorm", "LayerNorm", 9.0)])
    view = diff_view(read_table(a), read_table(b), by=by)
    text = terminal.render(view, width=80)
    headers, rows = rows_of(text)
    key = headers[0]
    assert key in ("name", "op family") and f"{key} in B" not in headers
    assert all(row[0] for row in rows), text  # every row is named
    only_b = "LayerNormalization" if by == "type" else "LayerNorm"  # its family, or its name's end
    assert any(row[0].endswith(only_b) for row in rows), text
    assert f"where a row has no {key}, its {key} in B stands in" in " ".join(text.split())
    assert not any(row[0] for row in view.sections[0].people_rows if row["only_in"] == "B" and row["key"])


@pytest.mark.parametrize("names", [BERT, RESNET50], ids=["bert", "resnet50"])
@pytest.mark.parametrize("width", [24, 26, 30, 45])
def test_shortened_names_keep_the_rows_apart(names: list[str], width: int) -> None:
    shown = distinct(names, width)
    kept = [s for s in shown if s is not None]
    assert all(cell_len(s) <= width and legible(s, n) for s, n in zip(shown, names, strict=True) if s is not None)
    assert len(set(kept)) == len(kept)
    if names is BERT and width >= 24:  # the part that tells a row apart is kept
        assert len(kept) == len(names)
        for s, n in zip(kept, names, strict=True):
            assert ("intermediate" in s) == ("intermediate" in n) and n.split(".")[2] in s, (s, n)


def test_shortened_names_use_the_width_they_have() -> None:
    assert distinct(BERT, 44)[0] == BERT[0]  # fits whole
    wide = distinct(BERT, 40)[1]
    assert wide is not None and "intermediate" in wide and len(wide) >= 36, wide


def _profile(layers: list[Layer], durations_us: list[list[float]]) -> Profile:
    """``layers`` run ``len(durations_us)`` times, each run's per-layer durations as given."""
    runs = []
    for r, durs in enumerate(durations_us):
        start = r * 10_000 * US
        spans = [Span(i, start + i * 1000 * US, int(d * US), 1) for i, d in enumerate(durs)]
        runs.append(Run(start, int(sum(durs) * US), spans))
    return Profile(metadata=Metadata(model=ModelInfo("fake")), layers=layers, runs=runs)


def _headers(prof: Profile, width: int) -> list[str]:
    text = terminal.render(profile_view(prof, top=None, fmt="table", written={}, peaks=None), width=width)
    return rows_of(text)[0]


def test_integer_columns_outrank_the_float_ones_when_integer_work_dominates() -> None:
    quantized = [Layer(name=f"conv{i}_quant", op_type="QLinearConv", flops=1000, int_ops=10**9) for i in range(2)]
    floats = [Layer(name=f"conv{i}", op_type="Conv", flops=10**9, int_ops=10) for i in range(2)]
    for layers, first, second in ((quantized, "int ops", "computation"), (floats, "computation", "int ops")):
        prof = _profile(layers, [[100.0, 50.0]] * 3)
        seen = [h for w in range(80, 200, 4) for h in _headers(prof, w) if h in (first, second)]
        assert seen and seen[0] == first, (first, seen)


def test_counters_asked_for_stay_and_a_clock_reads_as_time() -> None:
    text = terminal.render(profile_view(layerperf.load(SAVED), top=None, fmt="table", written={}, peaks=None),
                           width=120)
    headers, rows = rows_of(text)
    assert "task-clock" in headers, headers
    clock = [row[headers.index("task-clock")] for row in rows]
    assert all(c.endswith(("ns", "µs", "ms", " s")) for c in clock), clock
    assert "provider" not in headers  # a detail went before the counter
    fmt = {c.key: c for c in counter_columns(["task-clock:u", "task-clock_per_flop", "page-faults"])}
    assert fmt["task-clock:u"].fmt(6_380_000.0) == "6.380 ms" and fmt["page-faults"].fmt(6_380_000.0) == "6.38 M"
    assert fmt["task-clock_per_flop"].fmt(0.25) == "0.25 ns/FLOP"
    assert fmt["task-clock:u"].priority < fmt["task-clock_per_flop"].priority  # asked for, before its metric


@pytest.mark.parametrize("label,event", [("tc", "task-clock"), ("TASK-CLOCK", "TASK-CLOCK"),
                                         ("sw_clock", "perf::PERF_COUNT_SW_TASK_CLOCK"), ("cpu", "cpu-clock:u")])
def test_a_clock_reads_as_time_by_its_event_whatever_its_label(label: str, event: str) -> None:
    if "::" in event:
        from layerperf.counters import pfm

        if not pfm.available():
            pytest.skip("libpfm4 is not installed")
    fmt = {c.key: c for c in counter_columns([label, f"{label}_per_flop", f"{label}_insitu"], {label: event})}
    assert fmt[label].fmt(6_380_000.0) == "6.380 ms" and fmt[f"{label}_insitu"].fmt(1_000.0) == "1.0 µs"
    assert fmt[f"{label}_per_flop"].fmt(0.25) == "0.25 ns/FLOP"
    # a label of another event is a count, whatever it is called
    other = {c.key: c for c in counter_columns(["task-clock"], {"task-clock": "page-faults"})}
    assert other["task-clock"].fmt(6_380_000.0) == "6.38 M"


def test_layers_off_in_the_counting_passes_are_named_below_the_table() -> None:
    from layerperf.renderers.views.profile import _fidelity

    prof = layerperf.load(SAVED)
    summ = summary(prof)
    flagged = [layer.name for layer in prof.layers][:7]
    lines = _fidelity(prof, {**summ, "fidelity": {**summ["fidelity"], "flagged_layers": flagged}})
    (line,) = [line for line in lines if "slower or faster" in line]
    assert f"7 of {summ['layers']} layers" in line and ", ".join(flagged[:5]) + " and 2 more" in line
    assert "node by node" in line  # ONNX Runtime's stepwise executor runs them one by one


def test_the_title_wraps_at_the_terminal_and_is_never_padded() -> None:
    view = profile_view(layerperf.load(SAVED), top=3, fmt="table", written={}, peaks=None)
    text = terminal.render(view, width=100, layout=Layout(columns=("calls",)))
    lines = text.splitlines()
    table_width = cell_len(lines[next(i for i, line in enumerate(lines) if line.startswith("┏"))])
    assert cell_len(lines[0]) > table_width and cell_len(lines[0]) <= 100
    piped = terminal.render(view)
    assert piped.splitlines()[0] == view.sections[0].title
    assert not any(line.endswith(" ") for line in piped.splitlines()[:1])


def test_the_peak_node_is_counted_from_one() -> None:
    rep = layerperf.load(SAVED).memory
    assert rep is not None
    line = summary_lines(rep)[0]
    assert f"while node {rep.peak_index + 1} of {len(rep.nodes)} runs: {rep.peak_node}" in line


def test_an_output_the_os_refuses_names_the_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["analyze", str(SAVED), "-o", "/proc/x.json"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("layerperf: error: cannot create /proc/x.json: ") and len(err.splitlines()) == 1, err


def test_a_size_option_the_model_has_no_use_for_is_a_warning() -> None:
    assert zoo.ignored_size("resnet18", None, 64) == \
        "--seq-len does not apply to resnet18 (an image model, sized by --image-size): ignored"
    assert zoo.ignored_size("bert-base", 64, None).startswith("--image-size does not apply to bert-base")  # type: ignore[union-attr]
    assert zoo.ignored_size("resnet18", 64, None) is None and zoo.ignored_size("x.onnx", 64, 64) is None
    prof = layerperf.profile("mobilenet_v2", runs=1, warmup=0, latency=False, image_size=32, seq_len=64)
    assert [w for w in prof.warnings if "--seq-len" in w] == [zoo.ignored_size("mobilenet_v2", None, 64)]


def test_a_float_model_totals_flops_alone_and_one_run_is_one_run() -> None:
    prof = _profile([Layer(name="conv", op_type="Conv", flops=2000, int_ops=0)], [[10.0]])
    summ = summary(prof)
    assert work_line(summ).startswith("2.00 kFLOP, ") and "int ops" not in work_line(summ)
    text = " ".join(terminal.render(profile_view(prof, top=None, fmt="table", written={}, peaks=None)).split())
    assert ", 1 run\n" not in text and ", 1 run " in text + " " and "1 runs" not in text


def _marked(prof: Profile) -> tuple[list[dict[str, Any]], str]:
    view = profile_view(prof, top=None, fmt="table", written={}, peaks=None)
    return [dict(r) for r in view.sections[0].people_rows], terminal.render(view, width=120)


def test_a_share_resting_on_one_slow_call_is_marked() -> None:
    layers = [Layer(name="spiky", op_type="Conv"), Layer(name="steady", op_type="Conv")]
    rows, text = _marked(_profile(layers, [[10.0, 50.0], [10.0, 50.0], [300.0, 50.0]]))
    by_name = {r["name"]: r for r in rows}
    assert str(by_name["spiky"]["share"]).endswith(" *") and not isinstance(by_name["steady"]["share"], str)
    flat = " ".join(text.split())
    assert "* = self % rests on outlier calls (1 of the rows shown)" in flat
    assert "spiky: median 10.0 µs, mean 106.7 µs, max 300.0 µs" in flat
    _, calm = _marked(_profile(layers, [[10.0, 50.0]] * 3))
    assert "outlier" not in calm


def test_the_mark_is_for_people_only() -> None:
    layers = [Layer(name="spiky", op_type="Conv")]
    view = profile_view(_profile(layers, [[10.0], [10.0], [300.0]]), top=None, fmt="json", written={}, peaks=None)
    assert isinstance(view.doc["layers"][0]["share"], float)


def test_diff_of_pytorch_traces_says_the_name_once_and_where_a_node_is_missing(tmp_path: Path) -> None:
    """Two PyTorch traces at 80 columns: no type columns (each row's type is its name, in A and in B, as the
    analyze table has it), and `only in` kept, so that a node missing from B (time B 0.0 µs) does not read as
    one measured at 0; CSV and JSON keep every key. Types that are not the names keep their column."""
    data = Path(__file__).parent / "data"
    a, b = read_table(data / "torch_cpu" / "trace.json.gz"), read_table(data / "torch_resnet18_cuda" / "trace.json.gz")
    view = diff_view(a, b, top=8)
    headers, cells = rows_of(terminal.render(view, width=80))
    assert "type" not in headers and "type in B" not in headers and "only in" in headers, headers
    rows = view.doc["rows"]
    assert all(r["op_type"] == r["key"] and r["op_type_b"] in (None, r["key_b"]) for r in rows)
    assert {r["only_in"] for r in rows} == {"A", "B", ""}  # both kinds of one-sided rows are among them
    side = headers.index("only in")
    assert [row[side] for row in cells] == [r["only_in"] for r in rows]
    assert {"op_type", "op_type_b"} <= set(view.sections[0].csv_keys())
    typed_a = _trace(tmp_path / "a.json", [("conv1", "Conv", 40.0), ("relu1", "Relu", 5.0)])
    typed_b = _trace(tmp_path / "b.json", [("conv1", "Conv", 20.0)])
    headers, _ = rows_of(terminal.render(diff_view(read_table(typed_a), read_table(typed_b)), width=80))
    assert "type" in headers and "only in" in headers, headers
