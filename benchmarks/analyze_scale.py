"""``layerperf analyze`` on traces of 1M to 30M events: wall time and peak RSS per size, side by side.

    .venv/bin/python benchmarks/analyze_scale.py --events 1000000,10000000,30000000
    .venv/bin/python benchmarks/analyze_scale.py --events 1000000 --formats ort --before /tmp/old/src
    .venv/bin/python benchmarks/analyze_scale.py --events 10000000 --report    # layerperf report instead

For each size, format (``ort``: ONNX Runtime's profile, read by its reader; ``kineto``: a PyTorch
profiler trace, read by the Kineto reader; see ``trace_gen.py``) and compression (plain, gzip), the
trace is generated chunk by chunk (never held whole) into ``--dir`` and ``layerperf analyze`` runs on
it in its own subprocess, ``--repeat`` times (median reported). Peak RSS is the largest of the
process's own high-water mark and the sum over it and its children sampled every 5 ms (layerperf
reads a big file in two processes): pages a forked child shares with its parent count in both, so it is an
upper bound. Peak PSS (sampled every 50 ms) counts a page shared by n processes 1/n in each: the memory
the tree takes. ``--before SRC`` runs another checkout's analyze on the
same files, alternately. The peers — ``json.load`` + pandas groupby, and Holistic Trace Analysis's
parser (Kineto traces) — run where the trace has at most ``--peer-max`` events and they are
installed. Each generated trace is deleted after its runs unless ``--keep``. The load average is
printed before and after each measurement: the machine is shared. ``--report`` measures ``layerperf
report TRACE -o page.html`` (the HTML page) rather than ``analyze``. ``--shapes S`` calls each node or op
with S input shapes in turn, as a decoder's growing sequence does: a trace of S times as many distinct ops
(the cost that grows with the distinct ops, not with the events).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from trace_gen import WRITERS  # noqa: E402 - the benchmark's own helper, beside it

PANDAS = """
import json, sys, gzip
import pandas as pd
opener = gzip.open if sys.argv[1].endswith(".gz") else open
with opener(sys.argv[1], "rt") as f:
    doc = json.load(f)
events = doc["traceEvents"] if isinstance(doc, dict) else doc
df = pd.json_normalize([e for e in events if e.get("ph") == "X"])
g = df.groupby("name").agg(time_us=("dur", "sum"), calls=("dur", "size"))
print(g.sort_values("time_us", ascending=False).head(20).to_string()[:0], end="")
"""

HTA = """
import sys
from hta.trace_analysis import TraceAnalysis
analyzer = TraceAnalysis(trace_dir=sys.argv[1])
analyzer.get_gpu_kernel_breakdown(visualize=False)
"""


def _tree_kib(pid: int, file: str, field: str) -> int:
    """KiB of ``field`` in ``/proc/PID/file``, summed over a process and its children."""
    total = 0
    try:
        with open(f"/proc/{pid}/{file}") as f:
            total += next(int(line.split()[1]) for line in f if line.startswith(field))
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            children = [int(c) for c in f.read().split()]
    except (OSError, StopIteration, ValueError):
        return total
    return total + sum(_tree_kib(c, file, field) for c in children)


def _tree_rss_kib(pid: int) -> int:
    """Resident KiB of a process and its children (pages they share counted in each: an upper bound)."""
    return _tree_kib(pid, "status", "VmRSS:")


def _tree_pss_kib(pid: int) -> int:
    """Proportional KiB of a process and its children: a page shared by n of them counts 1/n in each (a forked
    helper's pages shared with its parent are counted once, as the memory they take)."""
    return _tree_kib(pid, "smaps_rollup", "Pss:")


Run = tuple[float, float, float, int]  # wall s, peak RSS MiB (summed over the tree: an upper bound), peak PSS MiB, exit


def measure(argv: list[str], env: dict[str, str] | None = None) -> Run:
    """(wall seconds, peak RSS in MiB, peak PSS in MiB, exit code) of a command run on its own."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    tree_peak = pss_peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal tree_peak, pss_peak
        k = 0
        while not done.wait(0.005):
            tree_peak = max(tree_peak, _tree_rss_kib(proc.pid))
            k += 1
            if k % 10 == 0:  # every 50 ms: the kernel walks the page tables for it
                pss_peak = max(pss_peak, _tree_pss_kib(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    done.set()
    sampler.join()
    code = os.waitstatus_to_exitcode(status)
    if code and proc.stderr is not None:
        sys.stderr.write(proc.stderr.read().decode(errors="replace")[-400:])
    return wall, max(usage.ru_maxrss, tree_peak) / 1024, pss_peak / 1024, code


def analyze_argv(src: Path, trace: Path, extra: list[str], report: bool = False) -> list[str]:
    code = f"import sys; sys.path.insert(0, {str(src)!r}); from layerperf.cli import entry; sys.exit(entry())"
    if report:
        return [sys.executable, "-c", code, "report", str(trace), "-o", str(trace.with_suffix(".report.html")), *extra]
    return [sys.executable, "-c", code, "analyze", str(trace), "--format", "csv", *extra]


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def _fits(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def _median(runs: list[Run]) -> Run:
    walls = sorted(r[0] for r in runs)
    return walls[len(walls) // 2], max(r[1] for r in runs), max(r[2] for r in runs), max(r[3] for r in runs)


def bench_one(fmt: str, n: int, gz: bool, args: argparse.Namespace) -> list[str]:
    """Generate one trace, measure every tool on it, delete it; the table's lines."""
    suffix = ".json.gz" if gz else ".json"
    path = Path(args.dir) / (f"{fmt}_{n}{suffix}" if args.shapes == 1 else f"{fmt}_{n}_shapes{args.shapes}{suffix}")
    if not path.exists():
        t0 = time.perf_counter()
        code = (f"import sys; sys.path.insert(0, {str(HERE)!r}); from pathlib import Path; "
                f"from trace_gen import WRITERS; WRITERS[{fmt!r}](Path({str(path)!r}), {n}, shapes={args.shapes})")
        subprocess.run([sys.executable, "-c", code], check=True)  # its memory is not the benchmark's
        print(f"  generated {path.name} in {time.perf_counter() - t0:.0f} s", flush=True)
    size = path.stat().st_size / 2**20
    trees = ([("before", args.before)] if args.before else []) + [("layerperf", HERE.parent / "src")]
    runs: dict[str, list[Run]] = {label: [] for label, _ in trees}
    before_load = load()
    for _ in range(args.repeat):  # alternately, so that the host's slow spells hit both alike
        for label, src in trees:
            runs[label].append(measure(analyze_argv(src, path, args.analyze_args.split(), args.report)))
    lines = []
    for label, rs in runs.items():
        wall, rss, pss, code = _median(rs)
        lines.append(f"| {fmt} | {n:,} | {'gzip' if gz else 'plain'} | {size:,.0f} | {label} | {wall:.2f} | "
                     f"{rss:,.0f} | {pss:,.0f} | {code} | {before_load} → {load()} |")
    if n <= args.peer_max:
        if _fits("pandas"):
            wall, rss, pss, code = measure([sys.executable, "-c", PANDAS, str(path)])
            lines.append(f"| {fmt} | {n:,} | {'gzip' if gz else 'plain'} | {size:,.0f} | json.load + pandas | "
                         f"{wall:.2f} | {rss:,.0f} | {pss:,.0f} | {code} | {load()} |")
        if fmt == "kineto" and _fits("hta"):
            with tempfile.TemporaryDirectory() as d:
                os.link(path, Path(d) / f"rank-0{suffix}")
                wall, rss, pss, code = measure([sys.executable, "-c", HTA, d])
            lines.append(f"| {fmt} | {n:,} | {'gzip' if gz else 'plain'} | {size:,.0f} | HTA parser | {wall:.2f} | "
                         f"{rss:,.0f} | {pss:,.0f} | {code} | {load()} |")
    path.with_suffix(".report.html").unlink(missing_ok=True)
    if not args.keep:
        path.unlink()
    for line in lines:
        print(line, flush=True)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", default="1000000", help="sizes, comma-separated (default 1000000)")
    parser.add_argument("--formats", default="ort,kineto", help="ort, kineto (default both)")
    parser.add_argument("--compress", default="plain,gzip", help="plain, gzip (default both)")
    parser.add_argument("--shapes", type=int, default=1,
                        help="distinct input shapes per node or op, as a decoder's growing sequence (default 1; "
                             "1500 makes a 1M-event ONNX Runtime trace of 300,000 distinct ops; 31250 a Kineto "
                             "one of 250,000)")
    parser.add_argument("--repeat", type=int, default=1, help="layerperf runs per trace; the median is reported")
    parser.add_argument("--before", type=Path, help="another checkout's src folder, run alternately")
    parser.add_argument("--analyze-args", default="",
                        help="more arguments for layerperf analyze, e.g. '--aggregate-by kernel'")
    parser.add_argument("--peer-max", type=int, default=1_000_000, help="largest trace the peers run on")
    parser.add_argument("--dir", default=None, help="where traces are written (default: a temporary directory)")
    parser.add_argument("--keep", action="store_true", help="keep the generated traces")
    parser.add_argument("--report", action="store_true", help="measure `layerperf report` (the HTML page) instead")
    args = parser.parse_args()
    tmp = None
    if args.dir is None:
        tmp = args.dir = tempfile.mkdtemp(prefix="layerperf-scale-")
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    print(f"{os.cpu_count()} CPUs; load average (1/5/15 min) before/after each measurement; "
          f"free disk {shutil.disk_usage(args.dir).free / 2**30:.0f} GiB in {args.dir}; "
          + ("layerperf report TRACE -o page.html" if args.report else "layerperf analyze TRACE --format csv")
          + f" {args.analyze_args}".rstrip())
    print("| format | events | file | MiB | tool | wall s | peak RSS MiB | peak PSS MiB | exit | load |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    try:
        for n in (int(x) for x in args.events.split(",")):
            for fmt in args.formats.split(","):
                if fmt not in WRITERS:
                    raise SystemExit(f"unknown format {fmt}")
                for comp in args.compress.split(","):
                    bench_one(fmt, n, comp == "gzip", args)
    finally:
        if tmp is not None and not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
