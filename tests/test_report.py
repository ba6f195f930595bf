"""``layerperf report``: the self-contained HTML page, its safety (escaping, CSP), its table and charts."""

from __future__ import annotations

import base64
import gzip
import hashlib
import itertools
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import orjson
import pytest
from onnx import TensorProto, helper

import layerperf
from layerperf.calibration.peaks import Peaks
from layerperf.cli import main
from layerperf.renderers import html
from layerperf.renderers.html.page import json_block

from conftest import run_cli

DATA = Path(__file__).parent / "data"
KINETO = DATA / "torch_cpu" / "trace.json.gz"
HOSTILE = ("<script>alert(1)</script>", "</script><img src=x onerror=alert(1)>")
HOSTILE_TYPE = "<svg onload=alert(3)>"
HOSTILE_INPUT = '"><svg onload=alert(5)>'


class Dom(HTMLParser):
    """What a browser's parser makes of the page: elements with their (unescaped) attributes, the text of
    scripts, and the rows of each table."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self.rows: dict[str, list[dict[str, str | None]]] = {}
        self.headers: dict[str, list[str]] = {}
        self._table: str | None = None
        self._script: dict[str, str | None] | None = None
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.elements.append((tag, a))
        if tag == "table":
            self._table = a.get("id") or "?"
            self.rows[self._table], self.headers[self._table] = [], []
        elif tag == "tr" and self._table and "data-name" in a:
            self.rows[self._table].append(a)
        elif tag == "th" and self._table:
            self.headers[self._table].append(str(a.get("data-key")))
        elif tag == "script":
            self._script = a
            self.scripts.append((a, ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._table = None
        elif tag == "script":
            self._script = None

    def handle_data(self, data: str) -> None:
        if self._script is not None:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)

    def by_id(self, element_id: str) -> list[tuple[str, dict[str, str | None]]]:
        return [(t, a) for t, a in self.elements if a.get("id") == element_id]

    def with_class(self, tag: str, cls: str) -> list[dict[str, str | None]]:
        return [a for t, a in self.elements if t == tag and cls in str(a.get("class") or "").split()]


def hostile_model() -> onnx.ModelProto:
    """Node names, tensor names (shown in the summary's inputs and the memory picture) and the graph's name
    are markup."""
    x = helper.make_tensor_value_info(HOSTILE_INPUT, TensorProto.FLOAT, [1, 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])
    nodes = [helper.make_node("Relu", [HOSTILE_INPUT], ["r&<b>"], name=HOSTILE[0]),
             helper.make_node("Tanh", ["r&<b>"], ["y"], name=HOSTILE[1])]
    graph = helper.make_graph(nodes, "</title><script>alert(2)</script>", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> layerperf.Profile:
    path = tmp_path_factory.mktemp("hostile") / "hostile.onnx"
    onnx.save(hostile_model(), path)
    prof = layerperf.profile(str(path), runs=3, warmup=1, memory=True)
    prof.warnings.append("a warning naming </script><b onmouseover=alert(4)>x</b>")
    return prof


def tef_trace(path: Path, runs: int = 3) -> Path:
    """A Trace Event Format file whose names and op types are markup."""
    events, t = [], 0.0
    nodes = [("conv1", "Conv", 40.0), (HOSTILE[0], HOSTILE_TYPE, 10.0), (HOSTILE[1], "Relu", 5.0)]
    for _ in range(runs):
        for name, op, dur in nodes:
            events.append({"ph": "X", "name": name, "pid": 1, "tid": 7, "ts": t, "dur": dur,
                           "args": {"op_type": op, "flops": 1000, "bytes": 400}})
            t += dur + 1
    path.write_bytes(orjson.dumps({"traceEvents": events}))
    return path


def check_safe(page: str) -> Dom:
    """The page parses as its own markup only: two scripts (the data block and the page's, allowed by its
    hash), no element or attribute a model or trace could have smuggled in, no URL."""
    dom = Dom(page)
    for raw in (*HOSTILE, HOSTILE_TYPE, HOSTILE_INPUT, "<b onmouseover", "</title><script>", "r&<b>"):
        assert raw not in page
    tags = {t for t, _ in dom.elements}
    assert not tags & {"img", "b", "iframe", "object", "embed", "link", "base", "form"}
    assert all(a.get("class") == "chart" or a.get("id") in ("memory",) for t, a in dom.elements if t == "svg")
    assert [a.get("type") for a, _ in dom.scripts] == ["application/json", None]
    for _, attrs in dom.elements:
        assert not any(k.startswith("on") for k in attrs), attrs  # no event handler attribute anywhere
        assert "src" not in attrs
        href = attrs.get("href")
        assert href is None or href.startswith("#")
    assert not re.search(r"(?i)(https?:|ftp:|//[a-z0-9])", page.replace("http-equiv", "")), "an external URL"
    # the data block cannot be ended early: what is inside is JSON, '<' '>' '&' all escaped
    data_text = dom.scripts[0][1]
    assert not re.search(r"[<>&]", data_text)
    orjson.loads(data_text)
    # the CSP allows exactly the page's one inline script, by its hash; nothing is fetched
    csp = next(a["content"] for t, a in dom.elements if t == "meta" and a.get("http-equiv") ==
               "Content-Security-Policy")
    assert csp is not None
    script = dom.scripts[1][1]
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in csp
    assert "default-src 'none'" in csp and "unsafe-inline" not in csp.split("style-src")[0]
    return dom


def timeline_of(dom: Dom, element_id: str = "timeline") -> dict[str, Any]:
    """The timeline's data as the page holds it (what timeline.js draws)."""
    data: dict[str, Any] = orjson.loads(dom.scripts[0][1])["timelines"][element_id]
    return data


def drawn_calls(dom: Dom, element_id: str = "timeline") -> list[dict[str, Any]]:
    """The calls of the run the timeline draws first: name, start (ns after the run's start), duration, lane
    name and depth in it."""
    data = timeline_of(dom, element_id)
    part = next(p for p in data["parts"] if p["run"] == data["runs"]["drawn"])
    c = part["calls"]
    starts = list(itertools.accumulate(c["t"]))
    return [{"name": data["names"][n], "start": t, "dur": d, "lane": data["lanes"][lane]["name"], "depth": z}
            for n, t, d, lane, z in zip(c["n"], starts, c["d"], c["l"], c["z"], strict=True)]


def test_hostile_names_render_as_text(hostile: layerperf.Profile, tmp_path: Path) -> None:
    path = layerperf.report(hostile, tmp_path / "report.html", peaks=None)
    page = path.read_text()
    dom = check_safe(page)
    names = [layer.name for layer in hostile.layers]
    assert set(HOSTILE) <= set(names)
    rows = dom.rows["layers"]
    assert len(rows) == len(hostile.layers)  # one row per layer
    assert sorted(str(r["data-name"]) for r in rows) == sorted(names)  # the names, as text, round trip
    assert {str(a["data-name"]) for a in dom.with_class("circle", "point")} <= set(names)
    drawn = drawn_calls(dom)
    assert {c["name"] for c in drawn} == set(names)  # one run drawn, its calls' names as data
    assert len(drawn) == len(hostile.runs[0].spans)
    data = orjson.loads(dom.scripts[0][1])
    assert sorted(data["tables"]["layers"]["names"]) == sorted(names)
    assert dom.by_id("memory") and dom.by_id("warnings")  # the memory timeline, warnings escaped in it
    assert "&lt;/script&gt;&lt;b onmouseover=alert(4)&gt;" in page
    assert "&quot;&gt;&lt;svg onload=alert(5)&gt;=1x64 float32" in page  # the summary's inputs line, as text


def test_trace_with_markup_in_names_and_types(tmp_path: Path) -> None:
    trace = tef_trace(tmp_path / "t.json")
    out = tmp_path / "r.html"
    assert main(["report", str(trace), "-o", str(out)]) == 0
    dom = check_safe(out.read_text())
    assert sorted(str(r["data-name"]) for r in dom.rows["layers"]) == sorted(["conv1", *HOSTILE])
    bars = [a.get("data-type") for a in dom.with_class("rect", "bar")]
    assert HOSTILE_TYPE in bars and "Conv" in bars
    assert len(drawn_calls(dom)) == 3  # one run of three calls: a run starts where conv1 recurs


def test_json_block_cannot_be_closed() -> None:
    block = json_block("d", {"s": "</script><!-- & -->", "n": float("nan")})
    inner = block[block.index(">") + 1:block.rindex("</script>")]
    assert "<" not in inner and ">" not in inner and "&" not in inner
    assert orjson.loads(inner) == {"s": "</script><!-- & -->", "n": None}


def test_table_headers_and_sort_keys(hostile: layerperf.Profile) -> None:
    dom = Dom(html.html(hostile, peaks=None))
    keys = dom.headers["layers"]
    for key in ("name", "op_type", "calls", "median_us", "share", "flops_per_s"):
        assert key in keys
    assert "pct_of_peak" not in keys  # no calibration, no "% of peak"
    data = orjson.loads(dom.scripts[0][1])["tables"]["layers"]
    assert data["keys"] == keys
    col = keys.index("median_us")
    assert data["numeric"][col] and all(isinstance(r[col], float) for r in data["rows"])
    assert not data["numeric"][keys.index("name")]


def test_roofline_without_and_with_calibration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAYERPERF_CACHE", str(tmp_path / "cache"))  # a machine never calibrated
    trace = tef_trace(tmp_path / "t.json")
    page = html.html(trace)
    dom = Dom(page)
    assert dom.by_id("roofline") and not dom.with_class("line", "ceiling")
    assert "run `layerperf calibrate`" in page
    # three layers of 1000 FLOPs over 400 bytes: each a point at intensity 2.5
    assert len(dom.with_class("circle", "point")) == 3
    peaks = Peaks("test cpu", 2, flops_per_s={1: 1e9, 2: 2e9}, bytes_per_s={2: 1e10}, int_ops_per_s={2: 4e9})
    dom = Dom(html.html(trace, peaks=peaks))
    assert len(dom.with_class("line", "ceiling")) == 4  # bandwidth slope and peak, float and int8
    data = orjson.loads(dom.scripts[0][1])["tables"]["layers"]
    assert "pct_of_peak" in data["keys"]
    col, rate = data["keys"].index("pct_of_peak"), data["keys"].index("flops_per_s")
    for row in data["rows"]:
        assert row[col] == pytest.approx(100 * row[rate] / 2e9)  # no thread count in a TEF trace: the most threads'


def test_calibration_of_the_profiled_machine(hostile: layerperf.Profile, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from layerperf.calibration import peaks as calibration

    monkeypatch.setenv("LAYERPERF_CACHE", str(tmp_path / "cache"))
    machine = hostile.metadata.machine
    assert machine is not None and machine.cpu is not None and machine.cores is not None
    assert "was never calibrated" in html.html(hostile)
    calibration.save(Peaks(machine.cpu, machine.cores, flops_per_s={1: 1e10}, bytes_per_s={1: 1e10}))
    dom = Dom(html.html(hostile))
    assert len(dom.with_class("line", "ceiling")) == 2 and "pct_of_peak" in dom.headers["layers"]


def test_ort_profile_renders(tmp_path: Path, tiny_model_path: Path) -> None:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = str(tmp_path / "ort")
    sess = ort.InferenceSession(str(tiny_model_path), so, providers=["CPUExecutionProvider"])
    for _ in range(3):
        sess.run(None, {"input": np.zeros((1, 3, 16, 16), dtype=np.float32)})
    trace = Path(sess.end_profiling())
    out = tmp_path / "ort.html"
    assert main(["report", str(trace), "-o", str(out)]) == 0
    dom = check_safe(out.read_text())
    from layerperf.readers.detect import read_table

    calls = read_table(trace)
    assert len(dom.rows["layers"]) == len(calls.name.values)
    assert dom.by_id("timeline") and dom.by_id("breakdown") and dom.by_id("roofline")
    assert len(drawn_calls(dom)) == len(calls) // 3  # one of the three runs
    # the FLOPs card, as a layerperf trace's "work per run": the median over the steady runs, the whole trace's
    # beside it
    from layerperf.util import units

    flops = float(np.nansum(calls.flops))
    facts = _facts(out.read_text())
    assert facts["runs"].startswith("3 runs (its model_run events")
    steady = 3 - timeline_of(dom)["runs"]["warmup"]
    assert facts["FLOPs"].startswith(f"{units.si(flops / 3, 'FLOP')} per run (median of {steady} steady runs")
    assert f"{units.si(flops, 'FLOP')} over the whole trace" in facts["FLOPs"]


def test_kineto_trace_renders(tmp_path: Path) -> None:
    from layerperf.analysis import aggregate as analysis
    from layerperf.readers.detect import read_table

    out = tmp_path / "k.html"
    assert main(["report", str(KINETO), "-o", str(out)]) == 0
    dom = check_safe(out.read_text())
    rows = analysis.rows(analysis.analyze(read_table(KINETO)))
    assert sorted(str(r["data-name"]) for r in dom.rows["layers"]) == sorted(r["name"] for r in rows)
    drawn = drawn_calls(dom)
    assert drawn and len(drawn) < len(read_table(KINETO))  # one run of two


def test_diff_report(tmp_path: Path) -> None:
    a = tef_trace(tmp_path / "a.json")
    events = orjson.loads(a.read_bytes())["traceEvents"]
    for e in events:
        e["dur"] *= 2
    events.append({"ph": "X", "name": "only_b", "pid": 1, "tid": 7, "ts": 1e4, "dur": 3.0, "args": {"op_type": "Add"}})
    b = tmp_path / "b.json"
    b.write_bytes(orjson.dumps({"traceEvents": events}))
    out = tmp_path / "d.html"
    assert main(["report", str(a), str(b), "-o", str(out)]) == 0
    dom = check_safe(out.read_text())
    assert sorted(str(r["data-name"]) for r in dom.rows["diff"]) == sorted(["conv1", *HOSTILE, "only_b"])
    assert "layers" not in dom.rows and dom.by_id("breakdown") and dom.by_id("summary")


def test_profile_report_flag(tmp_path: Path, tiny_model_path: Path) -> None:
    out = tmp_path / "prof"
    r = run_cli("profile", str(tiny_model_path), "--runs", "3", "--warmup", "1", "--out", str(out), "--report")
    assert r.returncode == 0, r.stderr
    assert f"wrote {out / 'report.html'}" in r.stdout
    dom = check_safe((out / "report.html").read_text())
    assert len(dom.rows["layers"]) == len(layerperf.load(out).layers)
    r = run_cli("profile", str(tiny_model_path), "--runs", "2", "--warmup", "1", "--report", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "report.html").is_file() and "wrote report.html" in r.stdout


@pytest.mark.parametrize("case", ["missing", "not_trace", "onnx", "no_dir", "suffix", "is_dir"])
def test_bad_input_is_one_line(case: str, tmp_path: Path, tiny_model_path: Path) -> None:
    good = tef_trace(tmp_path / "good.json")
    (tmp_path / "notes.txt").write_text("hello, not a trace\n")
    (tmp_path / "out").mkdir()
    trace, out = {
        "missing": (tmp_path / "nope.json", tmp_path / "out" / "r.html"),
        "not_trace": (tmp_path / "notes.txt", tmp_path / "out" / "r.html"),
        "onnx": (tiny_model_path, tmp_path / "out" / "r.html"),
        "no_dir": (good, tmp_path / "notes.txt" / "r.html"),  # a file where the folder would be
        "suffix": (good, tmp_path / "out" / "r.txt"),
        "is_dir": (good, tmp_path / "out"),
    }[case]
    before = sorted(p.name for p in tmp_path.rglob("*"))
    r = run_cli("report", str(trace), "-o", str(out))
    assert r.returncode == 2
    assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert r.stderr.startswith("layerperf: error: ")
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing written, not even a temporary


def test_gzip_and_profile_directory(tmp_path: Path, hostile: layerperf.Profile) -> None:
    written = layerperf.save(hostile, tmp_path / "prof")
    gz = tmp_path / "trace.json.gz"
    gz.write_bytes(gzip.compress(written["trace.json"].read_bytes()))
    for source in (tmp_path / "prof", gz):
        dom = check_safe(html.html(source, peaks=None))
        assert len(dom.rows["layers"]) == len(hostile.layers)
        assert dom.by_id("memory")  # a layerperf trace is read as its Profile: memory, counters, summary


def test_diff_command_writes_the_page_by_suffix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tef_trace(tmp_path / "a.json"), tef_trace(tmp_path / "b.json", runs=2)
    out = tmp_path / "x.html"
    assert main(["diff", str(a), str(b), "--by", "type", "-o", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    dom = check_safe(out.read_text())
    assert sorted(str(r["data-name"]) for r in dom.rows["diff"]) == sorted(["Conv", "Relu", HOSTILE_TYPE])
    assert main(["diff", str(a), str(b), "--format", "json", "-o", str(tmp_path / "y.html")]) == 2
    assert not (tmp_path / "y.html").exists()


def int_model() -> onnx.ModelProto:
    """A MatMulInteger (integer work, no FLOP) after a float Relu."""
    rng = np.random.default_rng(0)
    a = helper.make_tensor_value_info("a", TensorProto.UINT8, [16, 256])
    f = helper.make_tensor_value_info("f", TensorProto.FLOAT, [16, 256])
    y = helper.make_tensor_value_info("y", TensorProto.INT32, [16, 256])
    g = helper.make_tensor_value_info("g", TensorProto.FLOAT, [16, 256])
    w = onnx.numpy_helper.from_array(rng.integers(0, 255, (256, 256), dtype=np.uint8), "w")
    nodes = [helper.make_node("MatMulInteger", ["a", "w"], ["y"], name="qmm"),
             helper.make_node("Relu", ["f"], ["g"], name="relu")]
    graph = helper.make_graph(nodes, "int", [a, f], [y, g], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def test_integer_layers_on_their_own_ceiling(tmp_path: Path) -> None:
    path = tmp_path / "int.onnx"
    onnx.save(int_model(), path)
    prof = layerperf.profile(str(path), runs=3, warmup=1)
    qmm = next(r for r in prof.table() if r["name"] == "qmm")
    assert qmm["int_ops"] and not qmm["flops"]
    peaks = Peaks("test cpu", 2, flops_per_s={2: 1e9}, int_ops_per_s={2: 1e12}, bytes_per_s={2: 1e10})
    dom = Dom(html.html(prof, peaks=peaks))
    ints = dom.with_class("circle", "int")
    assert [a["data-name"] for a in ints] == ["qmm"]
    assert "relu" in [a["data-name"] for a in dom.with_class("circle", "point")]
    data = orjson.loads(dom.scripts[0][1])["tables"]["layers"]
    row = data["rows"][data["names"].index("qmm")]
    assert row[data["keys"].index("pct_of_peak")] == pytest.approx(100 * qmm["int_ops_per_s"] / 1e12)  # the int8 peak


def test_table_of_very_many_ops_is_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from layerperf.renderers.html import table

    monkeypatch.setattr(table, "MAX_ROWS", 2)
    page = html.html(tef_trace(tmp_path / "t.json"), peaks=None)
    dom = Dom(page)
    assert [r["data-name"] for r in dom.rows["layers"]] == ["conv1", HOSTILE[0]]  # the most self time first
    assert "the 2 rows with the most self time of 3" in page


def test_calibration_file_and_calls_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from layerperf.calibration import peaks as calibration
    from layerperf.readers.detect import read_table

    monkeypatch.setenv("LAYERPERF_CACHE", str(tmp_path / "cache"))
    trace = tef_trace(tmp_path / "t.json")
    saved = calibration.save(Peaks("other cpu", 8, flops_per_s={8: 1e11}, bytes_per_s={8: 1e10}))
    out = tmp_path / "r.html"
    assert main(["report", str(trace), "--calibration", str(saved), "-o", str(out)]) == 0
    assert len(Dom(out.read_text()).with_class("line", "ceiling")) == 2
    assert main(["report", str(trace), "--calibration", str(tmp_path / "none.json"), "-o", str(out)]) == 2
    only_peak = Peaks("other cpu", 8, flops_per_s={8: 1e11})  # no bandwidth measured: the peak alone
    assert len(Dom(html.html(trace, peaks=only_peak)).with_class("line", "ceiling")) == 1
    (tmp_path / "cache" / "calibration" / saved.name).write_text("{damaged")
    monkeypatch.setattr(calibration, "machine_key", lambda *a: saved.stem)  # this machine: the damaged file
    assert "calibration unreadable" in html.html(trace)
    dom = Dom(html.html(read_table(trace), peaks=None))  # a Calls table in hand
    assert len(dom.rows["layers"]) == 3
    with pytest.raises(TypeError):
        html.html(42)


def test_a_trace_of_one_step_draws_the_step() -> None:
    """PyTorch's trace says it holds one step: its ops recurring within it mark no runs; the calls of the
    step are drawn, the few after it left out."""
    from layerperf.readers.detect import read_table

    trace = DATA / "torch_cuda" / "trace.json.gz"
    calls = read_table(trace)
    assert calls.meta["runs"] == 1
    [(start, end)] = calls.meta["run_windows_ns"]
    page = html.html(trace, peaks=None)
    in_step = (calls.ts_ns >= start) & (calls.ts_ns < end)
    assert 0 < in_step.sum() < int((~np.isnan(calls.ts_ns)).sum())
    assert len(drawn_calls(Dom(page))) == int(in_step.sum())
    assert "<dd>1 (its ProfilerStep events)</dd>" in page
    assert "(the whole trace: 1 run)" in page


def _torch_trace(path: Path, *, steps: bool) -> tuple[Path, int]:
    """3 forward calls of a CNN with 2 convs (``steps``: under a schedule, 1 step waited, 1 warmed up, 4
    recorded, each ended by p.step()); the trace and how many forward calls it holds."""
    torch = pytest.importorskip("torch", reason="torch is not installed")
    from torch.profiler import ProfilerActivity, profile, schedule

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.Conv2d(8, 8, 3, padding=1)).eval()
    x = torch.randn(1, 3, 16, 16)
    plan = schedule(wait=1, warmup=1, active=4) if steps else None
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU], record_shapes=True, schedule=plan) as prof:
        for _ in range(6 if steps else 3):
            model(x)
            if steps:
                prof.step()
    prof.export_chrome_trace(str(path))
    return path, 4 if steps else 3


def _facts(page: str) -> dict[str, str]:
    import html as std_html

    return {k: std_html.unescape(v) for k, v in re.findall(r"<dt>([^<]*)</dt><dd>([^<]*)</dd>", page)}


@pytest.mark.parametrize("steps", [False, True])
def test_runs_of_a_torch_trace_with_and_without_profiler_steps(tmp_path: Path, steps: bool) -> None:
    """The runs are the ProfilerSteps, or else the periods of the op sequence (not "where the first op occurs
    again": a CNN with two convs would be cut in half); one run is drawn, whole, and the summary's totals
    say they are per run."""
    from layerperf.readers.detect import read_table

    trace, runs = _torch_trace(tmp_path / "t.json", steps=steps)
    calls = read_table(trace)
    per_forward = len(calls) // runs
    assert per_forward * runs == len(calls)
    page = html.html(trace, peaks=None)
    facts = _facts(page)
    how = "its ProfilerStep events" if steps else f"its op sequence repeats 3 times, every {per_forward} calls"
    assert facts["runs"].startswith(f"{runs} {'step' if steps else 'run'}s ({how})")
    dom = Dom(page)
    drawn = drawn_calls(dom)
    assert len(drawn) == per_forward  # one whole forward
    assert sum(c["name"] == "aten::conv2d" for c in drawn) == 2
    data = timeline_of(dom)
    assert len(data["runs"]["dur"]) == runs and data["noun"] == ("step" if steps else "run")
    warmup = data["runs"]["warmup"]
    flops = float(np.nansum(calls.flops))
    assert flops > 0
    from layerperf.util import units

    assert facts["FLOPs"].startswith(f"{units.si(flops / runs, 'FLOP')} per {data['noun']} (median of "
                                     f"{runs - warmup} steady {data['noun']}s")
    assert f"{units.si(flops, 'FLOP')} over the whole trace" in facts["FLOPs"]
    assert f"per {data['noun']} (median of" in facts["total self time"]


def test_run_period() -> None:
    from layerperf.analysis.trace_runs import period

    assert period(np.array([0, 1, 0, 2, 0, 1, 0, 2])) == 4  # the first op recurs within a run: not a run start
    assert period(np.array([0, 1, 0, 1, 0, 1])) == 2
    assert period(np.array([0, 0, 0, 0]), prefer=2) == 2  # the period the trace's count of runs gives, first
    assert period(np.array([0, 1, 0, 1]), prefer=1) == 2
    assert period(np.array([0, 1, 2, 0, 1])) is None  # n % p != 0 for every p that fits
    assert period(np.array([5])) is None


def test_trace_without_a_period_is_one_run(tmp_path: Path) -> None:
    events = [{"ph": "X", "name": n, "pid": 1, "tid": 1, "ts": 10.0 * i, "dur": 5, "args": {"op_type": "Op"}}
              for i, n in enumerate(["a", "b", "a", "c", "b"])]
    trace = tmp_path / "t.json"
    trace.write_bytes(orjson.dumps({"traceEvents": events}))
    page = html.html(trace, peaks=None)
    assert _facts(page)["runs"] == ("1 (its calls, by start, do not repeat as one sequence (a runtime call more in one "
                                    "pass is enough): one run)")
    assert len(drawn_calls(Dom(page))) == 5
