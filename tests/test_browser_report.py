"""The HTML report in a real headless Chromium (tests/browser.py drives it over WebDriver).

Reports are made here from real profiles (mobilenet_v2 with memory data, a diff of two profiles, and a
model whose node names are HTML/script injections), opened from disk, and checked through the DOM
against the contract the report keeps (element ids and attributes) and against the figures layerperf
itself computes for the same traces. Without Chromium these tests skip, except under CI (CI set), where
a missing browser fails them: a green CI run must have run them.
"""

from __future__ import annotations

import json
import re
import struct
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx
import pytest
from onnx import TensorProto, helper

from browser import Browser, WebDriverError, require_binaries
from layerperf.data.profile import Profile
from layerperf.readers.layerperf import load_profile

from conftest import run_cli

REPO = Path(__file__).resolve().parent.parent
HOSTILE_NAMES = ("<script>alert(1)</script>", "</script><img src=x onerror=alert(1)>")
BACKSPACE = "\ue003"


# --- the browser ------------------------------------------------------------------------------------




def open_report(browser: Browser, path: Path) -> list[str]:
    """Load a report from disk, wait for its script to finish building it; the console errors it logged."""
    assert path.is_file(), f"no report at {path}"
    if browser.alert_text() is not None:  # left open by an earlier failure: it would block every command
        browser.dismiss_alert()
    browser.console_log()  # drain what earlier pages logged
    try:
        browser.open_file(path)
        browser.wait_for("return document.body && document.body.dataset.ready === '1'")
    except WebDriverError as exc:
        if exc.error != "unexpected alert open":
            raise
        text = browser.alert_text()
        browser.dismiss_alert()
        pytest.fail(f"{path.name} opened an alert ({text!r}): a script ran that is not the page's own")
    return browser.console_errors()


def save_png(artifacts: Path, name: str, png: bytes) -> Path:
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    path = artifacts / name
    path.write_bytes(png)
    return path


def png_size(png: bytes) -> tuple[int, int]:
    width, height = struct.unpack(">II", png[16:24])  # the IHDR chunk comes first
    return int(width), int(height)


# --- the reports ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Report:
    """A report file and the figures layerperf computes for the same trace(s), to check the page against."""

    html: Path
    profile: Profile
    rows: dict[str, dict[str, Any]]  # the same run's `layerperf profile --format json` layers, by name


def cli_ok(*args: str) -> str:
    done = run_cli(*args)
    assert done.returncode == 0, f"layerperf {' '.join(args)} -> {done.returncode}\n{done.stderr}"
    return done.stdout


def profile_with_report(model: str, out: Path, *extra: str) -> Report:
    # one run writes the report, the trace and the JSON output: the page is checked against that run's figures
    cli_ok("profile", model, "--runs", "3", "--warmup", "1", "--no-latency", "--out", str(out), "--report",
           "-o", str(out / "layers.json"), *extra)
    rows = json.loads((out / "layers.json").read_text())["layers"]
    return Report(out / "report.html", load_profile(out / "trace.json"), {row["name"]: row for row in rows})


@pytest.fixture(scope="module")
def mobilenet(tmp_path_factory: pytest.TempPathFactory) -> Report:
    return profile_with_report("mobilenet_v2", tmp_path_factory.mktemp("mobilenet"), "--memory")


def hostile_model() -> onnx.ModelProto:
    """Relu -> Sigmoid, the nodes named after script injections (ONNX accepts any string as a name)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])
    nodes = [helper.make_node("Relu", ["x"], ["h"], name=HOSTILE_NAMES[0]),
             helper.make_node("Sigmoid", ["h"], ["y"], name=HOSTILE_NAMES[1])]
    graph = helper.make_graph(nodes, "<b onmouseover=alert(2)>graph</b>", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Report:
    base = tmp_path_factory.mktemp("hostile")
    onnx.save(hostile_model(), base / "hostile.onnx")
    # no graph optimization, so ONNX Runtime keeps both nodes under their own names
    return profile_with_report(str(base / "hostile.onnx"), base / "out", "--opt-level", "disable")


# --- the driver itself: its checks must be able to fail ---------------------------------------------


def test_driver_sees_errors_requests_and_alerts(browser: Browser, tmp_path: Path) -> None:
    throws = tmp_path / "throws.html"
    throws.write_text("<!doctype html><body><script>document.body.dataset.ready = '1';"
                      "throw new Error('thrown-by-the-page')</script></body>")
    errors = open_report(browser, throws)
    assert any("thrown-by-the-page" in e for e in errors), errors

    fetches = tmp_path / "fetches.html"
    fetches.write_text("<!doctype html><head><meta http-equiv='Content-Security-Policy' content=\"default-src "
                       "'none'\"></head><body data-ready='1'><img src='http://example.invalid/x.png'></body>")
    errors = open_report(browser, fetches)
    assert any("Content Security Policy" in e for e in errors), errors  # a blocked request is logged
    assert browser.execute("return performance.getEntriesByType('resource').length") == 1  # and still listed

    assert browser.alert_text() is None
    browser.execute("setTimeout(() => alert('opened'), 0)")
    deadline = time.monotonic() + 5
    while browser.alert_text() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        assert browser.alert_text() == "opened"
    finally:
        browser.dismiss_alert()
    assert browser.alert_text() is None


# --- reading the page -------------------------------------------------------------------------------

ROWS_JS = """
const table = document.getElementById(arguments[0] || 'layers');
const keys = [...table.querySelectorAll('thead th')].map(th => th.dataset.key);
return [...table.querySelectorAll('tbody tr')].map(tr => ({
  name: tr.dataset.name, hidden: tr.hidden,
  cells: Object.fromEntries([...tr.cells].map((td, i) => [keys[i], {text: td.textContent.trim(),
                                                                    value: td.dataset.value ?? null}]))}));
"""

HEADERS_JS = """
return [...document.getElementById(arguments[0] || 'layers').querySelectorAll('thead th')].map(th => ({
  key: th.dataset.key, sort: th.getAttribute('aria-sort')}));
"""

FOREIGN_URLS_JS = """
return [...document.querySelectorAll('[src],[href],[srcset],[action],[data],[poster]')]
  .flatMap(e => ['src', 'href', 'srcset', 'action', 'data', 'poster'].map(a => e.getAttribute(a)))
  .filter(v => v !== null && !v.startsWith('#'));
"""

BOXES_JS = """
// where the canvas timeline drew each call of its run (timeline.js answers it)
return window.layerperfTimelines[arguments[0]].boxes();
"""

BOX_JS = """
const svg = document.getElementById(arguments[0]);
if (!svg) return null;
const box = svg.getBoundingClientRect();
const marks = sel => [...svg.querySelectorAll(sel)].filter(m => {
  const b = m.getBoundingClientRect(); return b.width > 0 || b.height > 0; }).length;
return {tag: svg.tagName.toLowerCase(), width: box.width, height: box.height,
        rects: marks('rect'), circles: marks('circle'), paths: marks('path, polyline, polygon, line'),
        points: [...svg.querySelectorAll('circle.point')].map(c => c.dataset.name),
        named: [...svg.querySelectorAll('[data-name]')].map(e => e.dataset.name), text: svg.textContent};
"""

_UNIT = {"ns": 1e-3, "µs": 1.0, "us": 1.0, "ms": 1e3, "s": 1e6, "%": 1.0, "": 1.0,
         "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
_NUMBER = re.compile(r"^([-+]?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*([a-zA-Zµ%]*)")


def cell_number(text: str) -> float | None:
    """A cell's figure: '?' and '' are unknown (None); units and SI prefixes scaled ('1.5 ms' -> 1500 µs)."""
    match = _NUMBER.match(text.strip())
    if match is None:
        return None
    unit = match.group(2)
    scale = _UNIT.get(unit) or _UNIT.get(unit[:2]) or _UNIT.get(unit[:1]) or 1.0
    return float(match.group(1).replace(",", "")) * scale


def column_values(truth_rows: dict[str, dict[str, Any]], rows: list[dict[str, Any]], key: str) -> list[Any]:
    """Each row's value of a column, in the page's row order: layerperf's own figure for the layer where
    `profile --format json` has that key (so the page's order is checked against the data, not its own
    text), else the cell's data-value, else its text read as a number where it is one."""
    values: list[Any] = []
    for row in rows:
        truth = truth_rows.get(row["name"], {})
        if key in truth:
            values.append(truth[key])
            continue
        cell = row["cells"].get(key) or {"text": "", "value": None}
        raw = cell["value"] if cell["value"] is not None else cell["text"]
        number = cell_number(raw)
        values.append(number if number is not None or raw in ("?", "") else raw)
    return values


COLLATED_JS = """
// text in the order of the browser's own collation (localeCompare: what a page sorting text would use)
const [values, descending] = arguments;
return values.every((v, i) => i === 0 || (descending ? -1 : 1) * values[i - 1].localeCompare(v) <= 0);
"""


def is_sorted(values: list[Any], descending: bool, browser: Browser) -> bool:
    """Known values in order (unknowns, None, may sit anywhere); text in code-point, case-folded, natural or
    the browser's collation order."""
    known = [v for v in values if v is not None and not (isinstance(v, float) and v != v)]
    if all(isinstance(v, (int, float)) for v in known):
        keys: list[Any] = [known]
    else:
        text = [str(v) for v in known]
        natural = [[int(part) if part.isdigit() else part for part in re.split(r"(\d+)", t.casefold())]
                   for t in text]
        keys = [text, [t.casefold() for t in text], natural]
    for seq in keys:
        pairs = list(zip(seq, seq[1:], strict=False))
        try:
            if all((a >= b) if descending else (a <= b) for a, b in pairs):
                return True
        except TypeError:  # natural keys of mixed shapes
            continue
    return len(keys) > 1 and bool(browser.execute(COLLATED_JS, [str(v) for v in known], descending))


# --- the per-model report ---------------------------------------------------------------------------


def test_report_loads_offline_without_errors(browser: Browser, mobilenet: Report) -> None:
    errors = open_report(browser, mobilenet.html)
    assert errors == []
    assert browser.execute("return performance.getEntriesByType('resource').map(e => e.name)") == []
    assert browser.execute(FOREIGN_URLS_JS) == []
    summary = browser.execute("const s = document.getElementById('summary'); return s && s.textContent")
    assert summary and "mobilenet_v2" in summary
    assert browser.execute("return document.getElementById('warnings') !== null")


def test_table_has_one_row_per_layer(browser: Browser, mobilenet: Report) -> None:
    open_report(browser, mobilenet.html)
    rows = browser.execute(ROWS_JS)
    layers = mobilenet.profile.layers
    assert len(layers) > 20  # mobilenet_v2: a real table, not a toy
    assert len(rows) == len(layers)
    assert sorted(r["name"] for r in rows) == sorted(layer.name for layer in layers)
    name_cells = [r["cells"].get("name", {}).get("text") for r in rows]
    assert name_cells == [r["name"] for r in rows]  # the name column shows the name the row stands for


def check_sorting(browser: Browser, table: str, truth: dict[str, dict[str, Any]]) -> None:
    """Click every header of a table twice: rows ascending then descending by that column (checked against
    layerperf's figures), aria-sort on that header only, no row lost."""
    headers = browser.execute(HEADERS_JS, table)
    keys = [h["key"] for h in headers]
    assert all(keys) and len(set(keys)) == len(keys), keys  # every column named, once
    assert not any(h["sort"] in ("ascending", "descending") for h in headers)  # unsorted until clicked
    elements = browser.find_all(f"#{table} thead th")
    n_rows = len(browser.execute(ROWS_JS, table))
    numeric_checked = 0
    for key, element in zip(keys, elements, strict=True):
        for direction in ("ascending", "descending"):
            browser.click(element)
            rows = browser.execute(ROWS_JS, table)
            values = column_values(truth, rows, key)
            assert is_sorted(values, direction == "descending", browser), (table, key, direction, values)
            sorts = {h["key"]: h["sort"] for h in browser.execute(HEADERS_JS, table)}
            assert sorts[key] == direction
            assert all(s in (None, "none") for k, s in sorts.items() if k != key), sorts
            assert len(rows) == n_rows  # sorting moves rows, never drops them
        known = [v for v in values if isinstance(v, (int, float))]
        numeric_checked += len(set(known)) > 1
    assert numeric_checked >= 2  # at least two columns sorted on distinct numbers (not only text)
    assert browser.console_errors() == []


def test_clicking_headers_sorts_each_column(browser: Browser, mobilenet: Report) -> None:
    open_report(browser, mobilenet.html)
    assert {"name", "op_type"} <= {h["key"] for h in browser.execute(HEADERS_JS, "layers")}
    check_sorting(browser, "layers", mobilenet.rows)


def visible_names(browser: Browser) -> list[str]:
    return [r["name"] for r in browser.execute(ROWS_JS) if not r["hidden"]]


def test_filter_narrows_rows(browser: Browser, mobilenet: Report) -> None:
    open_report(browser, mobilenet.html)
    layers = mobilenet.profile.layers
    box = browser.find("#filter")
    for text in ("depthwise", "GEMM", "features.1"):  # GEMM: an op type, in other case
        expected = sorted(layer.name for layer in layers
                          if text.casefold() in layer.name.casefold() or text.casefold() in layer.op_type.casefold())
        assert 0 < len(expected) < len(layers), text  # the filter must narrow, to show it works
        browser.type(box, text)
        assert sorted(visible_names(browser)) == expected, text
        count = browser.execute("return document.getElementById('row-count').textContent")
        assert f"{len(expected)} of {len(layers)}" in count, count
        browser.type(box, BACKSPACE * len(text))
        assert len(visible_names(browser)) == len(layers)
    assert browser.console_errors() == []


def test_charts_render_with_their_marks(browser: Browser, mobilenet: Report, artifacts: Path) -> None:
    open_report(browser, mobilenet.html)
    layers = mobilenet.profile.layers
    charts = {chart: browser.execute(BOX_JS, chart) for chart in ("breakdown", "roofline", "memory", "memory-flow")}
    assert mobilenet.profile.memory is not None  # --memory: the memory charts are due
    for chart, box in charts.items():
        assert box is not None, f"no <svg id={chart}>"
        assert box["tag"] == "svg" and box["width"] > 0 and box["height"] > 0, (chart, box)
    op_types = {layer.op_type for layer in layers}
    assert charts["breakdown"]["rects"] >= len(op_types), charts["breakdown"]  # a bar per op type
    assert all(op in charts["breakdown"]["text"] for op in op_types), charts["breakdown"]["text"]
    drawn = browser.execute(BOXES_JS, "timeline")  # the canvas timeline: every call of the run drawn
    assert sorted(b["name"] for b in drawn) == sorted(layer.name for layer in layers)  # each layer once a run
    assert all(b["x1"] >= b["x0"] and b["y1"] > b["y0"] for b in drawn)
    canvas = browser.execute(BOX_JS, "timeline")
    assert canvas is not None and canvas["width"] > 0 and canvas["height"] > 0, canvas
    assert charts["memory"]["paths"] + charts["memory"]["rects"] > 0, charts["memory"]
    points = charts["roofline"]["points"]
    placeable = {layer.name for layer in layers if (layer.flops or 0) > 0 or (layer.int_ops or 0) > 0}
    assert set(points) <= {layer.name for layer in layers}
    assert placeable <= set(points), sorted(placeable - set(points))  # every layer with work is a point

    png = browser.screenshot()
    path = save_png(artifacts, "report.png", png)
    width, height = png_size(png)
    assert width >= 800 and height >= 600, (width, height)
    assert path.stat().st_size > 20_000  # a drawn page, not a blank one (a blank 1400x1000 PNG is ~6 KB)


# --- calibrated peaks ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def calibrated(mobilenet: Report, tmp_path_factory: pytest.TempPathFactory) -> Report:
    """mobilenet's trace reported with a calibration of its machine in a cache of the test's own: ceilings on
    the roofline and a "% of peak" column. The peaks are test input (round figures), not measured."""
    from layerperf.calibration import peaks as calibration

    base = tmp_path_factory.mktemp("calibrated")
    machine = mobilenet.profile.metadata.machine
    assert machine is not None
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LAYERPERF_CACHE", str(base / "cache"))  # read by the report's subprocess too
        calibration.save(calibration.Peaks(
            str(machine.cpu), int(machine.cores or 0), flops_per_s={1: 250e9, 2: 500e9},
            int_ops_per_s={1: 1e12, 2: 2e12}, bytes_per_s={1: 20e9, 2: 30e9}, measured_at="2026-11-24T00:00:00Z"))
        cli_ok("report", str(mobilenet.html.parent / "trace.json"), "-o", str(base / "report.html"))
    return Report(base / "report.html", mobilenet.profile, mobilenet.rows)


def test_calibrated_report_draws_ceilings_and_sorts_by_share_of_peak(browser: Browser, calibrated: Report,
                                                                      artifacts: Path) -> None:
    assert open_report(browser, calibrated.html) == []
    ceilings = browser.execute("""return [...document.querySelectorAll('#roofline line.ceiling')].map(l => {
        const b = l.getBoundingClientRect(); return b.width + b.height; });""")
    assert ceilings and all(size > 0 for size in ceilings), ceilings
    save_png(artifacts, "roofline-calibrated.png", browser.element_screenshot(browser.find("#roofline")))
    keys = [h["key"] for h in browser.execute(HEADERS_JS, "layers")]
    assert set(keys) - set(calibrated.rows[next(iter(calibrated.rows))]), keys  # a column beyond profile's own
    check_sorting(browser, "layers", calibrated.rows)  # the new column by its cells' figures


# --- nested calls ----------------------------------------------------------------------------------

SPANS_JS = """
return window.layerperfTimelines.timeline.boxes().map(b => (
  {name: b.name, left: b.x0, right: b.x1, top: b.y0, bottom: b.y1}));
"""


@pytest.fixture(scope="module")
def torch_modules(tmp_path_factory: pytest.TempPathFactory) -> Report:
    """resnet18 on the torch backend, level 1: modules nested in modules (layer1 > layer1.0 > layer1.0.conv1)."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed (pip install 'layerperf[torch]')")
    return profile_with_report("resnet18", tmp_path_factory.mktemp("torch"), "--backend", "torch",
                               "--image-size", "64")


def test_timeline_draws_nested_calls_inside_their_parent(browser: Browser, torch_modules: Report) -> None:
    assert open_report(browser, torch_modules.html) == []
    parents = {layer.name: layer.parent for layer in torch_modules.profile.layers if layer.parent}
    assert len(parents) > 20  # resnet18's blocks nest three deep
    spans = browser.execute(SPANS_JS)
    assert sorted({s["name"] for s in spans}) == sorted(layer.name for layer in torch_modules.profile.layers)
    by_name: dict[str, list[dict[str, float]]] = {}
    for span in spans:
        by_name.setdefault(span["name"], []).append(span)
    slack_px = 1.0  # bars are drawn to a tenth of a pixel
    for span in spans:
        parent = parents.get(span["name"])
        if parent is None:
            continue
        assert any(p["left"] - slack_px <= span["left"] and span["right"] <= p["right"] + slack_px
                   and p["bottom"] <= span["top"] + slack_px for p in by_name[parent]), (span, by_name[parent])
    assert len(browser.execute(ROWS_JS)) == len(torch_modules.profile.layers)


# --- a foreign trace -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ort_trace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict[str, Any]]]:
    """ONNX Runtime's own profile of mobilenet_v2 (64x64, 2 runs), its report, and `analyze --format json` rows."""
    import numpy as np
    import onnxruntime as ort

    from layerperf.models import zoo

    base = tmp_path_factory.mktemp("ort")
    opts = ort.SessionOptions()
    opts.enable_profiling = True
    opts.profile_file_prefix = str(base / "onnxruntime_profile")
    sess = ort.InferenceSession(str(zoo.path("mobilenet_v2", image_size=64)), opts,
                                providers=["CPUExecutionProvider"])
    feed = {i.name: np.zeros([int(d) for d in i.shape], np.float32) for i in sess.get_inputs()}
    for _ in range(2):
        sess.run(None, feed)
    trace = Path(sess.end_profiling())
    cli_ok("report", str(trace), "-o", str(base / "report.html"))
    rows = json.loads(cli_ok("analyze", str(trace), "--format", "json"))
    return base / "report.html", {row["name"]: row for row in rows}


def test_report_of_a_runtime_trace(browser: Browser, ort_trace: tuple[Path, dict[str, dict[str, Any]]]) -> None:
    """A trace layerperf did not write (no Profile behind it): analyze's table, one row per node, sortable."""
    html, truth = ort_trace
    assert open_report(browser, html) == []
    assert browser.execute("return performance.getEntriesByType('resource').length") == 0
    rows = browser.execute(ROWS_JS)
    assert len(truth) > 20
    assert sorted(r["name"] for r in rows) == sorted(truth)
    check_sorting(browser, "layers", truth)
    for chart in ("breakdown", "timeline"):
        box = browser.execute(BOX_JS, chart)
        assert box is not None and box["width"] > 0 and box["height"] > 0, (chart, box)


# --- the diff report --------------------------------------------------------------------------------


@dataclass(frozen=True)
class DiffReport:
    pages: dict[str, Path]  # the side-by-side page as `layerperf report A B` and `layerperf diff A B -o` write it
    rows: list[dict[str, Any]]  # `layerperf diff --format json` rows


@pytest.fixture(scope="module")
def diff(tmp_path_factory: pytest.TempPathFactory) -> DiffReport:
    base = tmp_path_factory.mktemp("diff")
    # all optimizations against basic ones: layers matched by name, by scope, and some on one side only
    for name, level in (("a", "all"), ("b", "basic")):
        cli_ok("profile", "resnet18", "--image-size", "64", "--runs", "3", "--warmup", "1", "--no-latency",
               "--top", "1", "--opt-level", level, "--out", str(base / name))
    a, b = str(base / "a" / "trace.json"), str(base / "b" / "trace.json")
    cli_ok("report", a, b, "-o", str(base / "report.html"))
    cli_ok("diff", a, b, "-o", str(base / "diff.html"))
    return DiffReport({"report": base / "report.html", "diff": base / "diff.html"},
                      json.loads(cli_ok("diff", a, b, "--format", "json"))["rows"])


@pytest.mark.parametrize("command", ["report", "diff"])
def test_diff_report_shows_every_layer_side_by_side(browser: Browser, diff: DiffReport, artifacts: Path,
                                                    command: str) -> None:
    assert open_report(browser, diff.pages[command]) == []
    assert browser.execute("return performance.getEntriesByType('resource').length") == 0
    names = browser.execute("return [...document.querySelectorAll('#diff tbody tr')].map(tr => tr.dataset.name)")
    assert len(names) == len(diff.rows)
    assert sorted(names) == sorted(str(row["key"]) for row in diff.rows)
    assert any(row["only_in"] for row in diff.rows)  # the fixture has unmatched layers, to show them
    if command == "report":
        save_png(artifacts, "diff.png", browser.screenshot())


def test_diff_table_sorts(browser: Browser, diff: DiffReport) -> None:
    open_report(browser, diff.pages["report"])
    check_sorting(browser, "diff", {str(row["key"]): row for row in diff.rows})


# --- hostile names ----------------------------------------------------------------------------------


def test_hostile_names_render_as_text(browser: Browser, hostile: Report, artifacts: Path) -> None:
    assert sorted(layer.name for layer in hostile.profile.layers) == sorted(HOSTILE_NAMES)
    assert open_report(browser, hostile.html) == []
    assert browser.alert_text() is None  # no injected alert() ran
    rows = browser.execute(ROWS_JS)
    assert sorted(r["name"] for r in rows) == sorted(HOSTILE_NAMES)
    for row in rows:
        assert row["cells"]["name"]["text"] == row["name"]  # the raw name, as text
    injected = browser.execute("""
        return {imgs: document.querySelectorAll('img').length,
                handlers: [...document.querySelectorAll('*')].filter(e => [...e.attributes].some(
                    a => a.name.startsWith('on'))).map(e => e.outerHTML.slice(0, 80)),
                scripts: [...document.scripts].filter(s => s.textContent.includes('alert(') &&  // code, not data
                    !['application/json', 'application/ld+json'].includes(s.type)).length,
                data: [...document.scripts].filter(s => s.type === 'application/json').map(s => s.textContent),
                bold: document.querySelectorAll('b').length,
                text: document.body.textContent};""")
    assert injected["imgs"] == 0 and injected["handlers"] == [] and injected["scripts"] == 0, injected
    assert injected["bold"] == 0
    for text in injected["data"]:  # a JSON data block holding the names was not cut short by a </script>
        json.loads(text)
    assert all(name in injected["text"] for name in HOSTILE_NAMES)
    assert browser.execute("return performance.getEntriesByType('resource').length") == 0
    save_png(artifacts, "hostile.png", browser.screenshot())


def test_page_runs_no_script_but_its_own(browser: Browser, hostile: Report) -> None:
    """The page's Content-Security-Policy stops a script or handler that got in (checked by adding them)."""
    open_report(browser, hostile.html)
    browser.execute("""
        const s = document.createElement('script'); s.textContent = 'window.__ran = "script"';
        document.body.appendChild(s);
        const d = document.createElement('div');
        d.innerHTML = '<img src="x" onerror="window.__ran = \\'handler\\'">';
        document.body.appendChild(d);""")
    time.sleep(0.3)  # let the image fail and the handler be refused
    assert browser.execute("return window.__ran === undefined ? null : window.__ran") is None
    assert browser.alert_text() is None
    errors = browser.console_errors()
    assert any("Content Security Policy" in e for e in errors), errors  # refused, and said so


def test_missing_browser_is_a_skip_locally_and_a_failure_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule the browser fixture applies, with Chromium hidden: a skip without CI, a failure with CI=true."""
    monkeypatch.setenv("LAYERPERF_CHROMIUM", "/nonexistent/chromium")
    monkeypatch.setenv("LAYERPERF_CHROMEDRIVER", "/nonexistent/chromedriver")
    for ci in ("", "0", "false"):
        monkeypatch.setenv("CI", ci)
        with pytest.raises(pytest.skip.Exception, match="Chromium not found"):
            require_binaries()
    for ci in ("true", "1"):
        monkeypatch.setenv("CI", ci)
        with pytest.raises(pytest.fail.Exception, match="CI is set and the browser tests cannot run"):
            require_binaries()


SHOWN_JS = """
// visible elements outside the table and the charts with a text of their own naming the layer (a tooltip)
const name = arguments[0];
return [...document.querySelectorAll('body *')].filter(e => !e.closest('table') && !e.closest('svg')
  && e.checkVisibility() && [...e.childNodes].some(n => n.nodeType === 3 && n.textContent.includes(name))).length;
"""

POINT_JS = """
// a roofline point the pointer can reach: the one hit at its own centre (points may overlap)
return [...document.querySelectorAll('#roofline circle.point')].find(c => {
  c.scrollIntoView({block: 'center'});
  const r = c.getBoundingClientRect();
  const hit = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2);
  return hit === c || c.contains(hit); }) || null;
"""


def test_hovering_a_roofline_point_names_its_layer(browser: Browser, mobilenet: Report) -> None:
    open_report(browser, mobilenet.html)
    point = browser.execute(POINT_JS)
    assert point is not None, "no roofline point can be hovered"
    name = browser.execute("return arguments[0].dataset.name", point)
    before = browser.execute(SHOWN_JS, name)
    browser.hover(next(iter(point.values())))
    # the pointer over the point brings its name up (waited for: a busy host may take a frame or more)
    shown = SHOWN_JS.replace("arguments[0]", json.dumps(name))
    assert browser.wait_for(f"return (() => {{ {shown} }})() > {before}", timeout_s=5.0)
