"""The visual report's size and how quickly a browser has it ready, for traces given or made here.

    .venv/bin/python benchmarks/report_page.py [TRACE ...] [--loads 5] [--synthetic OPS,RUNS ...]
        [--baseline OTHER/src]

For each trace (any format `layerperf report` reads; a profile directory too) and each synthetic
trace (OPS distinct ops x RUNS runs, Trace Event Format), builds the page in a process of its own
(the time ``layerperf.report`` took, imports excluded), prints its size, and when headless Chromium is
installed loads it --loads times from disk and prints when its script had finished
(``document.body.dataset.readyMs``: ms after navigation started) and how long the timeline's first
draw of a whole run took (``data-draw-ms``). With ``--baseline``, the same pages
are built by another checkout's layerperf too (its ``src`` folder), and its figures printed beside.
Builds and loads are interleaved across the pages (and the two codes), so a slow spell of the host
falls on all of them alike.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import orjson

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


def ready_ms(chromium: str, page: Path) -> tuple[int | None, float | None]:
    """When the page's script had finished (ms after navigation started), and how long its timeline's first
    draw of the whole run took (ms; None without a timeline)."""
    out = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120).stdout
    found = re.search(r'data-ready-ms="(\d+)"', out)
    drawn = re.search(r'data-draw-ms="([\d.]+)"', out)
    return (int(found.group(1)) if found else None), (float(drawn.group(1)) if drawn else None)


BUILD = ("import sys, time; from layerperf.renderers import html; t = time.perf_counter(); "
         "html.report(sys.argv[1], sys.argv[2]); print(time.perf_counter() - t)")


def build_s(src: Path, trace: Path, page: Path) -> float:
    """Seconds ``layerperf.report`` of the checkout ``src`` took to write ``page``, in a process of its own."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run([sys.executable, "-c", BUILD, str(trace), str(page)], capture_output=True, text=True,
                          env=env, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def _median(values: Sequence[float | int | None]) -> str:
    known = [v for v in values if v is not None]
    return f"{statistics.median(known):.2f}" if known else "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("traces", nargs="*", type=Path)
    ap.add_argument("--synthetic", action="append", default=[], metavar="OPS,RUNS")
    ap.add_argument("--loads", type=int, default=5)
    ap.add_argument("--builds", type=int, default=1, help="builds of each page (the median is printed)")
    ap.add_argument("--baseline", type=Path, help="another checkout's src folder, measured beside this one")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="report_page.") as tmp:
        measure(args, Path(tmp))


def measure(args: argparse.Namespace, tmp: Path) -> None:
    """Build each page, load it in Chromium where there is one, print the figures (files in ``tmp``)."""
    traces = list(args.traces)
    for spec in args.synthetic:
        ops, runs = (int(x) for x in spec.split(","))
        traces.append(synthetic(tmp / f"synthetic_{ops}x{runs}.json", ops, runs))
    codes = {"this": Path(__file__).resolve().parent.parent / "src"}
    if args.baseline is not None:
        codes = {"baseline": args.baseline.resolve(), **codes}
    pages = {(code, i): tmp / f"{code}{i}.html" for i in range(len(traces)) for code in codes}
    built: dict[tuple[str, int], list[float]] = {key: [] for key in pages}
    for _ in range(args.builds):
        for (code, i), page in pages.items():
            built[(code, i)].append(build_s(codes[code], traces[i], page))
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    times: dict[tuple[str, int], list[int | None]] = {key: [] for key in pages}
    draws: dict[tuple[str, int], list[float | None]] = {key: [] for key in pages}
    for _ in range(args.loads if chromium else 0):
        for key, page in pages.items():
            ready_at, draw = ready_ms(str(chromium), page)
            times[key].append(ready_at)
            draws[key].append(draw)
    for (code, i), page in pages.items():
        ready = (f"ready after {times[(code, i)]} ms (median {_median(times[(code, i)])}); timeline drawn in "
                 f"{_median(draws[(code, i)])} ms (median)") if chromium else "no chromium: load times not measured"
        print(f"{traces[i]} [{code}]: {page.stat().st_size:,} bytes, built in {_median(built[(code, i)])} s "
              f"({', '.join(f'{b:.2f}' for b in built[(code, i)])}); {ready}")


if __name__ == "__main__":
    main()
