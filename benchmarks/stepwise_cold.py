"""Where the stepwise ranks of a model's smallest layers part from the in-situ ones: each node's call made
once in the pass (as counted) and, for nodes that may run twice over the same buffers, again right after
(its session then warm); an empty Identity call just before each node (the shared call path after the
previous node, what a per-position calibration would subtract); in-situ runs interleaved round by round.

Per op type: in-situ median, the pass's time less the calibrated call (as the profile reports it), and in
the probing loop the empty call before each node, the node's call after it ("first") and made again at once
("again": the node's session warm, and its data). Then the rank correlation against the in-situ medians, each
op type's share of the squared rank differences (ranks over all layers, ties at their mean), the correlation
without the op type holding most of them, that op type's order among itself (stepwise against in situ, and
each side's halves of the runs against each other), its in-situ and pass times by the node before it, and the
ranks with a per-position calibration (the empty call just before each node subtracted).

    python benchmarks/stepwise_cold.py --model bert-base --threads 1 [--rounds 20]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from layerperf.backends.ort.session import to_ortvalue
from layerperf.backends.ort.stepwise import StepwiseExecutor, calibration_model
from layerperf.data.fidelity import _ranks, spearman
from layerperf.models.skeleton import read_skeleton
from layerperf.readers.ort import split_runs

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stepwise_causes import calibrate, insitu_session, prepared  # noqa: E402 - the benchmark beside it

# ops whose second call over the same bound buffers computes what the first did (no input overwritten)
REPEATABLE = {"Reshape", "Transpose", "Softmax", "Gelu", "Cast", "Identity", "Unsqueeze", "Squeeze", "Flatten"}


def measure(model: str, threads: int, rounds: int, tmp: Path) -> dict[str, np.ndarray]:
    src, feed, optimized, order, ops = prepared(model, threads, tmp)
    real = insitu_session(src.path, threads, tmp / "prof2")
    ex = StepwiseExecutor(optimized, order, global_threads=True, data_dir=tmp, original=read_skeleton(src.path))
    empty = StepwiseExecutor(calibration_model(), ["empty"], global_threads=True)
    one = {"x": np.zeros(1, np.float32)}
    for _ in range(3):
        real.run(None, feed)
        ex.run_pass(feed)
        empty.run_pass(one)
    assert ex.bound is not None and empty.bound is not None, "the calls were not bound"
    n = len(order)
    plain, before, first, again = (np.full((rounds, n), np.nan) for _ in range(4))
    clock = time.perf_counter_ns
    for r in range(rounds):
        real.run(None, feed)
        plain[r] = ex.run_pass(feed)[1]
        ex.bound.feed({k: to_ortvalue(v)._get_c_value() for k, v in feed.items()})
        empty.bound.feed({"x": to_ortvalue(one["x"])._get_c_value()})
        for i in range(n):
            t0 = clock()
            empty.bound.call(0)
            t1 = clock()
            ex.bound.call(i)
            t2 = clock()
            before[r, i], first[r, i] = t1 - t0, t2 - t1
            if ops[i] in REPEATABLE:
                t0 = clock()
                ex.bound.call(i)
                again[r, i] = clock() - t0
    runs = split_runs(json.loads(Path(real.end_profiling()).read_text()))[3:]
    assert all([node.name for node in run.nodes] == order for run in runs), "the in-situ runs' node order changed"
    insitu = np.array([[node.dur_us * 1e3 for node in run.nodes] for run in runs])
    return {"ops": np.array(ops), "insitu": insitu, "plain": plain, "before": before, "first": first,
            "again": again, "calibration": np.array(calibrate(True, True))}


def _rho(a: np.ndarray, b: np.ndarray) -> str:
    r = spearman(a, b)
    return "n/a" if r is None else f"{r:.3f}"


def report(res: dict[str, np.ndarray], model: str, threads: int) -> None:
    ops, cal = res["ops"], float(np.median(res["calibration"]))
    insitu = np.median(res["insitu"], axis=0)
    step = np.maximum(np.median(res["plain"], axis=0) - cal, 0)
    half = res["insitu"].shape[0] // 2
    rep = np.array([np.median(col[~np.isnan(col)]) if (~np.isnan(col)).any() else np.nan for col in res["again"].T])
    print(f"{model} threads={threads} nodes={len(ops)} calibrated call {cal / 1e3:.2f} µs (load "
          f"{os.getloadavg()[0]:.2f})")
    print(f"  {'op type':26s} {'n':>4s} {'in situ':>8s} {'in pass':>8s} {'empty before':>12s} {'first':>7s}"
          f" {'again':>7s}  (µs, medians; in pass: as profiled, less the calibrated call)")
    for op in sorted(set(ops.tolist()), key=lambda o: -float(np.sum(insitu[ops == o]))):
        m = ops == op
        row = (f"  {op:26s} {int(m.sum()):4d} {np.median(insitu[m]) / 1e3:8.2f} {np.median(step[m]) / 1e3:8.2f}"
               f" {np.median(np.median(res['before'], 0)[m]) / 1e3:12.2f}"
               f" {np.median(np.median(res['first'], 0)[m]) / 1e3:7.2f}")
        if op in REPEATABLE:
            row += f" {np.median(rep[m]) / 1e3:7.2f}"
        print(row)
    # each op type's share of sum (rank difference)^2, ranks over all layers with ties at their mean rank
    sq = (_ranks(step) - _ranks(insitu)) ** 2
    shares = {op: float(sq[ops == op].sum() / sq.sum()) for op in set(ops.tolist())}
    top = max(shares, key=shares.__getitem__)
    m = ops == top
    print(f"  rank correlation {_rho(step, insitu)} (in-situ halves against each other "
          f"{_rho(np.median(res['insitu'][:half], 0), np.median(res['insitu'][half:], 0))}); of the squared rank "
          f"differences, over all layers, {top}'s layers hold {shares[top]:.0%}, then "
          + ", ".join(f"{o} {s:.1%}" for o, s in sorted(shares.items(), key=lambda kv: -kv[1])[1:4]))
    print(f"  {top}: {insitu[m].min() / 1e3:.1f}-{insitu[m].max() / 1e3:.1f} µs in situ, "
          f"{step[m].min() / 1e3:.1f}-{step[m].max() / 1e3:.1f} in the pass (medians)")
    print(f"  without the {int(m.sum())} {top} layers: {_rho(step[~m], insitu[~m])}; {top} among themselves: "
          f"stepwise against in situ {_rho(step[m], insitu[m])}, in-situ halves "
          f"{_rho(np.median(res['insitu'][:half], 0)[m], np.median(res['insitu'][half:], 0)[m])}, stepwise "
          f"halves {_rho(np.median(res['plain'][:half], 0)[m], np.median(res['plain'][half:], 0)[m])}")
    where = np.flatnonzero(m)
    after = [str(ops[i - 1]) if i else "(first)" for i in where]
    print(f"  {top} by the node before it (mean µs, in situ / in pass): " + ", ".join(
        f"{prev} {np.mean(insitu[where[[a == prev for a in after]]]) / 1e3:.2f} / "
        f"{np.mean(step[where[[a == prev for a in after]]]) / 1e3:.2f} ({after.count(prev)})"
        for prev in sorted(set(after))))
    first = np.median(res["first"], axis=0)
    per_position = np.maximum(np.median(res["first"] - res["before"], axis=0), 0)
    print(f"  the node's call timed after an empty call, less the calibrated call: rank "
          f"{_rho(np.maximum(first - cal, 0), insitu)}; less that empty call instead (a per-position calibration):"
          f" {_rho(per_position, insitu)}, ratio {per_position.sum() / insitu.sum():.3f} (in pass, calibrated: "
          f"{step.sum() / insitu.sum():.3f})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="bert-base")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    here = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="cold-") as tmp:
        try:
            res = measure(args.model, args.threads, args.rounds, Path(tmp))
        finally:
            os.chdir(here)
    report(res, args.model, args.threads)
    return 0


if __name__ == "__main__":
    sys.exit(main())
