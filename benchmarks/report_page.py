"""The visual report's size and how quickly a browser has it ready, for traces given or made here.

    .venv/bin/python benchmarks/report_page.py [TRACE ...] [--loads 5] [--synthetic OPS,RUNS ...]

For each trace (any format `layerperf report` reads; a profile directory too) and each synthetic
trace (OPS distinct ops x RUNS runs, Trace Event Format), builds the page (time taken), prints its
size, and when headless Chromium is installed loads it --loads times from disk and prints when its
script had finished (``document.body.dataset.readyMs``: ms after navigation started). Loads are
interleaved across the pages, so a slow spell of the host falls on all of them alike.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import orjson

from layerperf.renderers import html

TYPES = ("Conv", "Relu", "Add", "MatMul", "Softmax", "LayerNormalization", "Gelu", "Reshape")


def synthetic(path: Path, ops: int, runs: int) -> Path:
    events, t = [], 0.0
    for _ in range(runs):
        for i in range(ops):
            dur = 1.0 + (i * 7919 % 29)
            events.append({"ph": "X", "name": f"/block.{i // 50}/node_{i}", "pid": 1, "tid": 1 + (i % 3 == 0),
                           "ts": t, "dur": dur, "args": {"op_type": TYPES[i % len(TYPES)]}})
            t += dur + 0.5
    path.write_bytes(orjson.dumps({"traceEvents": events}))
    return path


def ready_ms(chromium: str, page: Path) -> int | None:
    out = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120).stdout
    found = re.search(r'data-ready-ms="(\d+)"', out)
    return int(found.group(1)) if found else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("traces", nargs="*", type=Path)
    ap.add_argument("--synthetic", action="append", default=[], metavar="OPS,RUNS")
    ap.add_argument("--loads", type=int, default=5)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="report_page."))
    traces = list(args.traces)
    for spec in args.synthetic:
        ops, runs = (int(x) for x in spec.split(","))
        traces.append(synthetic(tmp / f"synthetic_{ops}x{runs}.json", ops, runs))
    pages = []
    for i, trace in enumerate(traces):
        t0 = time.perf_counter()
        page = html.report(trace, tmp / f"page{i}.html")
        built_s = time.perf_counter() - t0
        pages.append(page)
        print(f"{trace}: {page.stat().st_size:,} bytes, built in {built_s:.2f} s")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("no chromium: load times not measured")
        return
    times: dict[Path, list[int | None]] = {p: [] for p in pages}
    for _ in range(args.loads):
        for page in pages:
            times[page].append(ready_ms(chromium, page))
    for trace, page in zip(traces, pages, strict=True):
        print(f"{trace}: ready after {times[page]} ms")


if __name__ == "__main__":
    main()
