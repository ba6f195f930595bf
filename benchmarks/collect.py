"""Collection throughput of `layerperf collect`: configurations per minute measured here (a worker process) and
on a local Ray instance (`--ray local`), side by side.

Each round runs the same sweep into a fresh store once each way, alternating which goes first, and times the
whole command (start-up included: the worker process, or the Ray instance). Prints each run, the medians, their
ratio and the load before and after. Needs the ray extra for the Ray side (skipped, and said, without it).

    python benchmarks/collect.py --models resnet18,mobilenet_v2 --threads 1,2 --runs 10 --rounds 3
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _collect(store: Path, args: argparse.Namespace, ray: bool) -> tuple[float, int]:
    cmd = [sys.executable, "-m", "layerperf", "collect", "--models", args.models, "--threads", args.threads,
           "--batch", args.batch, "--runs", str(args.runs), "--warmup", str(args.warmup), "--store", str(store)]
    if ray:
        cmd += ["--ray", "local"]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode:
        sys.exit(f"collect failed: {done.stderr.strip().splitlines()[-1]}")
    db = sqlite3.connect(store)
    n = db.execute("SELECT count(*) FROM configs WHERE status = 'ok'").fetchone()[0]
    db.close()
    return wall, n


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="resnet18,mobilenet_v2")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--batch", default="1")
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    sides = ["local"] + (["ray"] if importlib.util.find_spec("ray") else [])
    if len(sides) == 1:
        print("ray is not installed: the Ray side is skipped (pip install 'layerperf[ray]')")
    print(f"load before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    rates: dict[str, list[float]] = {s: [] for s in sides}
    with tempfile.TemporaryDirectory(prefix="lp-bench-") as tmp:
        for r in range(args.rounds):
            order = sides if r % 2 == 0 else sides[::-1]
            for side in order:
                wall, n = _collect(Path(tmp) / f"{side}{r}.db", args, side == "ray")
                rates[side].append(n / wall * 60)
                per_min = rates[side][-1]
                print(f"round {r + 1} {side:5s}: {n} configurations in {wall:6.1f} s = {per_min:5.1f} per minute")
    print(f"load after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    medians = {s: statistics.median(v) for s, v in rates.items()}
    print("median: " + ", ".join(f"{s} {m:.1f} configurations/min" for s, m in medians.items()))
    if "ray" in medians:
        print(f"ray / local: x{medians['ray'] / medians['local']:.2f}")


if __name__ == "__main__":
    main()
