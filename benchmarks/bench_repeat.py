"""Repeatability of ``layerperf bench``: back-to-back runs of one Conv (>= 1 ms) agree on the median.

Runs the same Conv twice in a row, ``--pairs`` times, each run a real ``layerperf bench`` command
(``--mode cli``, the default: a fresh process, as a user runs it) or a ``bench_op`` call
(``--mode api``), and prints each run's median, CV, the samples it used, those it set aside (another
process held the CPU + the CPU ran slowed) and the CPU-speed yardstick's p10, then how far the two
medians of each pair are apart. Exit status 0 when every pair agrees within ``--tolerance`` (5%), 1
otherwise.

bench warns when its figure is not to be trusted: on a virtual machine the host's other tenants can
slow a core down for seconds at a time, and a run slowed throughout (``SLOWED``), with a CV above
5% (``NOISY``) or with fewer clean samples than asked (``FEW``) says so. The summary gives the
agreement of all pairs (the exit status too: nothing is dropped) and of the pairs neither of whose
runs warned: the claim a user can rely on.

    python benchmarks/bench_repeat.py
    python benchmarks/bench_repeat.py --pairs 10 --mode api --threads 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from typing import Any

from layerperf.bench.measure import DEFAULT_SAMPLES, DEFAULT_SPEED_WAIT_S
from layerperf.bench.stats import NOISY_CV

# ResNet's 3x3 64->64 conv at 56x56: 231 MFLOP, a few ms on one core, well above the 1 ms floor.
OP = ["Conv", "--input", "X=1x64x56x56", "--input", "W=64x64x3x3", "--input", "B=64", "--attr", "pads=1,1,1,1"]


def run_cli(args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "layerperf", "bench", *OP, "--threads", str(args.threads), "--samples",
           str(args.samples), "--min-time", args.min_time, "--speed-wait", str(args.speed_wait), "--format", "json",
           "--no-overhead"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.exit(f"layerperf bench failed: {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def run_api(args: argparse.Namespace) -> dict[str, Any]:
    import layerperf
    from layerperf.bench.parse import parse_duration_ms

    r = layerperf.bench_op("Conv", {"X": "1x64x56x56", "W": "64x64x3x3", "B": "64"}, {"pads": [1, 1, 1, 1]},
                           threads=args.threads, samples=args.samples,
                           min_time_ms=parse_duration_ms(args.min_time), overhead=False,
                           speed_wait_s=args.speed_wait)
    return r.to_json()


def apart(x: float, y: float) -> float:
    """How far two positive figures are apart, relative to the smaller."""
    return abs(x - y) / min(x, y)


def flags(doc: dict[str, Any]) -> list[str]:
    """Why bench warned that this run's figure is not to be trusted (empty: it did not)."""
    return [name for name, on in (("SLOWED", doc["slowed_used"]), ("BUSY", doc["used_disturbed"]),
                                  ("NOISY", doc["cv"] > NOISY_CV),
                                  ("FEW", doc["n_samples"] < doc["requested_samples"])) if on]


def describe(doc: dict[str, Any]) -> str:
    return (f"median {doc['median_us'] / 1e3:6.3f} ms  CV {100 * doc['cv']:4.1f}%  used {doc['n_samples']:4d}  "
            f"aside {doc['disturbed']:2d}+{doc['slowed']:4d}  yardstick p10 {doc['yardstick_p10_us']:5.1f} µs"
            f"{''.join('  ' + f for f in flags(doc))}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=8, help="back-to-back pairs of runs (default 8)")
    p.add_argument("--mode", choices=["cli", "api"], default="cli", help="run the command or call bench_op")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads (default 1, bench's default)")
    p.add_argument("--samples", type=int, default=DEFAULT_SAMPLES,
                   help=f"samples per run (default {DEFAULT_SAMPLES}, bench's default)")
    p.add_argument("--min-time", default="1ms", help="least duration of a sample (default 1ms)")
    p.add_argument("--speed-wait", type=float, default=DEFAULT_SPEED_WAIT_S,
                   help=f"seconds each run may sample longer for full-speed samples (default "
                        f"{DEFAULT_SPEED_WAIT_S:g}, bench's default)")
    p.add_argument("--tolerance", type=float, default=0.05, help="largest allowed difference (default 0.05)")
    args = p.parse_args()
    run = run_cli if args.mode == "cli" else run_api
    print(f"layerperf bench {' '.join(OP)} --threads {args.threads} --samples {args.samples} "
          f"--min-time {args.min_time}   ({args.mode}, load average {os.getloadavg()[0]:.2f})")
    diffs, trusted = [], []
    for i in range(args.pairs):
        a, b = run(args), run(args)
        if min(a["median_us"], b["median_us"]) < 1000:
            print("warning: this Conv runs under 1 ms here: the figure is outside the claim's scope")
        diff = apart(a["median_us"], b["median_us"])
        diffs.append(diff)
        if not flags(a) and not flags(b):
            trusted.append(diff)
        verdict = "ok" if diff <= args.tolerance else "DIFFER"
        print(f"pair {i + 1}: {describe(a)} | {describe(b)} | apart {100 * diff:5.2f}% {verdict}")
    within = sum(d <= args.tolerance for d in diffs)
    print(f"{within} of {len(diffs)} pairs agree within {100 * args.tolerance:.0f}%; medians apart: "
          f"median {100 * statistics.median(diffs):.2f}%, max {100 * max(diffs):.2f}%  "
          f"(load average now {os.getloadavg()[0]:.2f})")
    if trusted:
        ok = sum(d <= args.tolerance for d in trusted)
        print(f"pairs with no warning on either run: {ok} of {len(trusted)} agree within "
              f"{100 * args.tolerance:.0f}%; medians apart: median {100 * statistics.median(trusted):.2f}%, "
              f"max {100 * max(trusted):.2f}%")
    else:
        print("every pair had a run with a warning")
    return 0 if within == len(diffs) else 1


if __name__ == "__main__":
    sys.exit(main())
