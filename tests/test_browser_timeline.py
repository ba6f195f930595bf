"""The report's second edition in headless Chromium (tests/browser.py): the canvas timeline zooms and pans,
draws every call of a 5,000-op run, puts a GPU trace's kernels on their stream linked to the op that
launched them; a chart's bar selects exactly its op type; counter headers carry units and are in view;
a nav link does not hide its heading under the sticky header. Pages come from files in tests/data or
traces made here; screenshots go to the artifacts folder (to be looked at)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from browser import Browser
from layerperf.renderers import html
from test_report_views import COUNTERS, CPU_PEAKS, H100

VIEW_JS = "const d = document.getElementById(arguments[0]).dataset; return [Number(d.viewStart), Number(d.viewEnd)]"


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("pages")
    wide = base / "wide.json"  # one run of 5,000 calls on two threads
    wide.write_bytes(orjson.dumps({"traceEvents": [
        {"ph": "X", "name": f"/block.{i // 50}/node_{i}", "pid": 1, "tid": 1 + i % 2, "ts": i * 2.0, "dur": 1.5,
         "args": {"op_type": ("Conv", "Relu", "Add")[i % 3]}} for i in range(5000)]}))
    gemm = base / "gemm.json"  # Gemms and the Reshapes ONNX Runtime names after them (gemm_*_reshape)
    gemm.write_bytes(orjson.dumps({"traceEvents": [
        {"ph": "X", "name": name, "pid": 1, "tid": 1, "ts": i * 20.0, "dur": 10.0, "args": {"op_type": op}}
        for i, (name, op) in enumerate([("gemm_input_reshape_1", "Reshape"), ("fc1", "Gemm"),
                                        ("gemm_output_reshape_2", "Reshape"), ("fc2", "Gemm"),
                                        ("gemm_input_reshape_3", "Reshape"), ("relu", "Relu")])]}))
    types = base / "types.json"  # 24 op types: the chart folds the 8 smallest into one bar
    types.write_bytes(orjson.dumps({"traceEvents": [
        {"ph": "X", "name": f"node_{i}", "pid": 1, "tid": 1, "ts": i * 200.0, "dur": 100.0 - i * 3,
         "args": {"op_type": f"Type{i}"}} for i in range(24)]}))
    out = {}
    for name, source, peaks in (("h100", H100, None), ("h100_cpu", H100, CPU_PEAKS), ("wide", wide, None),
                                ("gemm", gemm, None), ("counters", COUNTERS, None), ("types", types, None)):
        out[name] = html.write(html.html(source, peaks=peaks) if peaks else html.html(source), base / f"{name}.html")
    return out


def open_page(browser: Browser, path: Path) -> None:
    browser.console_log()
    browser.open_file(path)
    browser.wait_for("return document.body && document.body.dataset.ready === '1'")
    assert browser.console_errors() == []


def dataset(browser: Browser, element_id: str = "timeline") -> dict[str, Any]:
    return dict(browser.execute("return Object.assign({}, document.getElementById(arguments[0]).dataset)",
                                element_id))


def test_zoom_and_pan_change_the_visible_range(browser: Browser, pages: dict[str, Path], artifacts: Path) -> None:
    open_page(browser, pages["h100"])
    start, end = browser.execute(VIEW_JS, "timeline")
    assert start == 0 and end > 0
    browser.click(browser.find('#timeline button[data-act="in"]'))
    browser.wait_for(f"const d = document.getElementById('timeline').dataset; return d.viewEnd - d.viewStart < {end}")
    s1, e1 = browser.execute(VIEW_JS, "timeline")
    assert e1 - s1 == pytest.approx((end - start) / 2, rel=0.01)  # "+": half the span, about its middle
    canvas = browser.find("#timeline canvas.tl-main")
    browser.wheel(canvas, -400, x=100)  # the wheel, away from the user: zoom in about the pointer
    browser.wait_for(f"const d = document.getElementById('timeline').dataset; return d.viewEnd - d.viewStart < "
                     f"{e1 - s1} * 0.9")
    s2, e2 = browser.execute(VIEW_JS, "timeline")
    browser.drag(canvas, 100, -100)  # drag left: later in the run, the span kept
    browser.wait_for(f"return document.getElementById('timeline').dataset.viewStart > {s2}")
    s3, e3 = browser.execute(VIEW_JS, "timeline")
    assert e3 - s3 == pytest.approx(e2 - s2, rel=0.01)
    over = browser.find("#timeline canvas.tl-over")
    browser.drag(over, -300, -100)  # the overview: a stretch picked by dragging over it
    browser.wait_for(f"const d = document.getElementById('timeline').dataset; return d.viewStart < {s3}")
    browser.click(browser.find('#timeline button[data-act="all"]'))
    browser.wait_for(f"return document.getElementById('timeline').dataset.viewEnd == {end}")
    (artifacts / "timeline-h100.png").write_bytes(browser.element_screenshot(browser.find("#timeline-section")))


def test_every_call_of_a_5000_op_run_is_drawn(browser: Browser, pages: dict[str, Path], artifacts: Path) -> None:
    open_page(browser, pages["wide"])
    d = dataset(browser)
    assert d["calls"] == d["drawn"] == "5000"  # all in view at once: each colours at least its pixel
    assert d["lanes"] == "thread 1\nthread 2"
    boxes = browser.execute("return window.layerperfTimelines.timeline.boxes().length")
    assert boxes == 5000
    (artifacts / "timeline-5000.png").write_bytes(browser.element_screenshot(browser.find("#timeline-section")))


def test_gpu_trace_shows_a_kernel_lane_linked_to_its_ops(browser: Browser, pages: dict[str, Path],
                                                          artifacts: Path) -> None:
    open_page(browser, pages["h100"])
    d = dataset(browser)
    assert d["lanes"].split("\n") == ["thread 401", "GPU 0 stream 7"]
    assert int(d["kernels"]) > 200
    kernel = browser.execute("""const t = window.layerperfTimelines.timeline;
        return t.boxes().filter(b => b.gpu).sort((a, b) => (b.x1 - b.x0) - (a.x1 - a.x0))[0];""")
    canvas = browser.find("#timeline canvas.tl-main")
    box = browser.execute("const r = arguments[0].getBoundingClientRect(); return [r.width, r.height]",
                          browser.ref(canvas))
    x = round((kernel["x0"] + kernel["x1"]) / 2 - box[0] / 2)
    y = round((kernel["y0"] + kernel["y1"]) / 2 - box[1] / 2)
    browser.hover(canvas, x, y)
    tip = browser.wait_for("const t = document.getElementById('tip'); return !t.hidden && t.textContent")
    assert "launched by" in tip and "stream 7" in tip, tip
    assert int(dataset(browser)["flows"]) >= 1  # the arrow from the launching call
    headers = browser.execute("return [...document.querySelectorAll('#layers th')].map(t => t.textContent)")
    assert "% of peak" in headers  # the H100's published peak: device-time rows rated
    summary = browser.execute("return document.getElementById('summary').textContent")
    assert "NVIDIA H100 80GB HBM3" in summary and "does not say which machine" not in summary
    (artifacts / "gpu-section.png").write_bytes(browser.element_screenshot(browser.find("#gpu-section")))


def test_gpu_trace_has_no_share_of_a_cpu_peak(browser: Browser, pages: dict[str, Path]) -> None:
    open_page(browser, pages["h100_cpu"])  # a CPU calibration given: set aside, the GPU's own peaks kept
    headers = browser.execute("return [...document.querySelectorAll('#layers th')].map(t => t.textContent)")
    assert "% of peak" in headers
    text = browser.execute("return document.body.textContent")
    assert "the calibration given is of a CPU" in text and "GFLOP/s peak" not in text and "H100 SXM" in text


def test_clicking_gemm_selects_only_gemm_rows(browser: Browser, pages: dict[str, Path]) -> None:
    open_page(browser, pages["gemm"])
    browser.click(browser.find('#breakdown rect.bar[data-type="Gemm"]'))
    shown = browser.execute("""return [...document.querySelectorAll('#layers tbody tr')].filter(tr => !tr.hidden)
        .map(tr => tr.dataset.name);""")
    assert sorted(shown) == ["fc1", "fc2"]  # not the gemm_*_reshape Reshapes a substring would catch
    assert "2 of 6" in browser.execute("return document.getElementById('row-count').textContent")
    browser.click(browser.find("#selection button"))  # "show all"
    assert browser.execute("return [...document.querySelectorAll('#layers tbody tr')].filter(tr => !tr.hidden)"
                           ".length") == 6


def test_the_folded_bar_expands_to_every_op_type(browser: Browser, pages: dict[str, Path]) -> None:
    open_page(browser, pages["types"])
    visible = ("return [...document.querySelectorAll('svg.chart rect.bar[data-type]')]"
               ".filter(r => r.checkVisibility()).length")
    assert browser.execute(visible) == 16
    browser.click(browser.find("#breakdown rect.bar[data-expand]"))
    assert browser.execute(visible) == 24
    browser.click(browser.find('#breakdown-all rect.bar[data-type="Type23"]'))  # the smallest, now a bar of its own
    assert browser.execute("return [...document.querySelectorAll('#layers tbody tr')].filter(tr => !tr.hidden)"
                           ".map(tr => tr.dataset.name)") == ["node_23"]


def test_counter_headers_carry_units_and_are_in_view(browser: Browser, pages: dict[str, Path],
                                                     artifacts: Path) -> None:
    open_page(browser, pages["counters"])
    heads = browser.execute("""return [...document.querySelectorAll('#layers th')].map(t => {
        const r = t.getBoundingClientRect(); return {key: t.dataset.key, text: t.textContent, right: r.right}; });""")
    by_key = {h["key"]: h for h in heads}
    assert by_key["task-clock"]["text"] == "task-clock (CPU time)"
    assert by_key["page-faults"]["text"] == "page-faults (count)"
    width = browser.execute("return window.innerWidth")
    assert by_key["page-faults"]["right"] <= width  # seen without scrolling sideways
    assert dataset(browser)["lanes"] == "thread 3382"
    assert browser.execute("return window.layerperfTimelines.timeline.tracks.map(t => t.header)") == [
        "task-clock (CPU time)", "page-faults (count)"]
    (artifacts / "counters-table.png").write_bytes(browser.element_screenshot(browser.find("#layers")))


def test_a_run_clicked_on_the_strip_is_drawn(browser: Browser, pages: dict[str, Path]) -> None:
    open_page(browser, pages["counters"])
    drawn = dataset(browser)["run"]
    other = next(k for k in ("0", "1", "2") if k != drawn)
    browser.click(browser.find(f'#timeline .tl-strip [data-run="{other}"]'))
    assert dataset(browser)["run"] == other


def test_nav_link_leaves_the_heading_below_the_header(browser: Browser, pages: dict[str, Path]) -> None:
    open_page(browser, pages["counters"])
    browser.execute("window.scrollTo(0, document.body.scrollHeight)")
    browser.click(browser.find('nav a[href="#summary"]'))
    browser.wait_for("return document.querySelector('#summary h2').getBoundingClientRect().top >= "
                     "document.querySelector('header').getBoundingClientRect().bottom")
