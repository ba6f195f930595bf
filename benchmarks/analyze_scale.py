"""Analysing a 1,000,000-event trace: layerperf next to json.load + pandas groupby, same file, same run.

    .venv/bin/python benchmarks/analyze_scale.py [--events 1000000] [--keep DIR]
    .venv/bin/python benchmarks/analyze_scale.py --before /tmp/old/src   # another checkout, alternately

Writes a Trace Event Format file shaped like ONNX Runtime's node events (name, cat, ph, ts, dur,
pid, tid, args with op_name, provider, input/output shapes), 200 nodes per run, then runs each tool
in its own subprocess so its peak RSS is its own, and prints wall time and peak RSS of both. The
peer (pandas) runs only when pandas is installed (pip install 'layerperf[pandas]'). ``--before SRC``
names another checkout's ``src`` folder: its ``layerperf analyze`` runs alternately with this one's
on the same file, and the ratio of their medians is printed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import orjson

OPS = ("Conv", "Relu", "MaxPool", "Gemm", "Add", "MatMul", "Softmax", "LayerNormalization")

PEER = """
import json, sys
import pandas as pd
with open(sys.argv[1]) as f:
    doc = json.load(f)
events = doc["traceEvents"] if isinstance(doc, dict) else doc
df = pd.json_normalize([e for e in events if e.get("ph") == "X"])
g = df.groupby("name").agg(time_us=("dur", "sum"), calls=("dur", "size"), op_type=("args.op_name", "first"))
print(g.sort_values("time_us", ascending=False).head(20).to_string()[:0], end="")
"""


def make_trace(path: Path, n_events: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    nodes = [(f"/model/layer{i}/{OPS[i % len(OPS)]}", OPS[i % len(OPS)]) for i in range(200)]
    durs = rng.integers(1, 500, n_events).tolist()
    events, ts = [], 1000
    for i, dur in enumerate(durs):
        name, op = nodes[i % len(nodes)]
        events.append({"ph": "X", "cat": "Node", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
                       "args": {"op_name": op, "provider": "CPUExecutionProvider",
                                "input_type_shape": [{"float": [1, 64, 56, 56]}, {"float": [64, 64, 3, 3]}],
                                "output_type_shape": [{"float": [1, 64, 56, 56]}]}})
        ts += dur + 1
    path.write_bytes(orjson.dumps({"traceEvents": events}))


def _tree_rss_kib(pid: int) -> int:
    """Resident KiB of a process and its children (pages they share counted in each: an upper bound)."""
    total = 0
    try:
        with open(f"/proc/{pid}/status") as f:
            total += next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            children = [int(c) for c in f.read().split()]
    except (OSError, StopIteration, ValueError):
        return total
    return total + sum(_tree_rss_kib(c) for c in children)


def measure(argv: list[str]) -> tuple[float, float, int]:
    """(wall seconds, peak RSS in MiB, exit code) of a command run on its own.

    The peak is the larger of the process's own high-water mark and the largest sum of its and its
    children's resident memory seen every 5 ms (layerperf reads a big trace in two processes).
    """
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    tree_peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal tree_peak
        while not done.wait(0.005):
            tree_peak = max(tree_peak, _tree_rss_kib(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    done.set()
    sampler.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, max(usage.ru_maxrss, tree_peak) / 1024, proc.returncode


HERE_SRC = Path(__file__).resolve().parent.parent / "src"


def analyze_argv(src: Path, trace: Path) -> list[str]:
    code = f"import sys; sys.path.insert(0, {str(src)!r}); from layerperf.cli import entry; sys.exit(entry())"
    return [sys.executable, "-c", code, "analyze", str(trace), "--format", "csv"]


def _summary(label: str, runs: list[tuple[float, float, int]]) -> tuple[float, float, int]:
    walls = sorted(r[0] for r in runs)
    out = (walls[len(walls) // 2], max(r[1] for r in runs), max(r[2] for r in runs))
    print(f"{label + ' analyze':26s}: {out[0]:6.2f} s wall, {out[1]:7.0f} MiB peak RSS (exit {out[2]})"
          f"  [median of {len(runs)}: " + ", ".join(f"{w:.2f}" for w in walls) + " s]")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--keep", metavar="DIR", help="write the trace here and keep it")
    parser.add_argument("--repeat", type=int, default=3, help="layerperf runs; the median is reported (default 3)")
    parser.add_argument("--before", type=Path, help="another checkout's src folder, run alternately")
    parser.add_argument("--make", metavar="FILE", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.make:
        make_trace(Path(args.make), args.events)
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.keep or tmp) / f"trace_{args.events}.json"
        if not path.exists():
            # in a subprocess: a child's peak RSS starts from its parent's size when it forks
            subprocess.run([sys.executable, __file__, "--make", str(path), "--events", str(args.events)], check=True)
        print(f"trace: {args.events:,} events, {path.stat().st_size / 2**20:.0f} MiB; {os.cpu_count()} CPUs")
        trees = [("before", args.before), ("layerperf", HERE_SRC)] if args.before else [("layerperf", HERE_SRC)]
        runs: dict[str, list[tuple[float, float, int]]] = {label: [] for label, _ in trees}
        for _ in range(args.repeat):  # alternately, so the host's slow spells hit both alike
            for label, src in trees:
                runs[label].append(measure(analyze_argv(src, path)))
        results = {label: _summary(label, rs) for label, rs in runs.items()}
        lp = results["layerperf"]
        if args.before:
            before = results["before"]
            print(f"after / before            : time x{lp[0] / before[0]:.3f}, peak RSS x{lp[1] / before[1]:.3f}")
        try:
            import pandas  # noqa: F401
        except ImportError:
            print("json.load + pandas groupby: skipped (pandas not installed: pip install 'layerperf[pandas]')")
            return
        peer = measure([sys.executable, "-c", PEER, str(path)])
        print(f"json.load + pandas groupby: {peer[0]:6.2f} s wall, {peer[1]:7.0f} MiB peak RSS (exit {peer[2]})")
        print(f"ratio (peer / layerperf)  : time x{peer[0] / lp[0]:.2f}, peak RSS x{peer[1] / lp[1]:.2f}")


if __name__ == "__main__":
    main()
