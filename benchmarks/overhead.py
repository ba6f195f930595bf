"""Whole-model latency with and without layerperf's in-situ profiling, side by side in one run.

Two sessions of the same model and options live side by side, set up as ``layerperf profile`` sets
them up: one plain, one with ONNX Runtime's profiler, both stopping their pool's spinning when a run
returns. Runs alternate between them (blocks of ``--block``) so that drift and noise on a shared
machine hit both alike; each repeat gives the ratio of medians, and the per-node event cost
(profiled - plain median) / node events per run, in wall time and in the calling thread's CPU time
(which preemption on a busy host does not inflate; "CPU share" is plain CPU / wall time).

    python benchmarks/overhead.py [--models mobilenet_v2,/path/model.onnx] [--runs 100] [--repeats 5]
        [--threads 0] [--block 1] [--keep-spinning]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from layerperf.backends.base import RunPlan
from layerperf.backends.common import interleaved, timed
from layerperf.backends.ort import OrtOptions
from layerperf.backends.ort import measure as backend
from layerperf.models.source import open_model
from layerperf.readers.ort import split_runs


def sessions(model: str, threads: int, spin_stop: bool, tmp: Path) -> tuple[Any, Any, dict[str, Any]]:
    source = open_model(model)
    options = OrtOptions()
    feed = backend.prepare_feed(source, RunPlan(threads=threads), options.provider)
    plain = backend.create_session(source, backend.session_options(options.opt_level, threads, spin_stop=spin_stop),
                                   options.provider)
    profiled = backend.create_session(
        source, backend.session_options(options.opt_level, threads, profile_prefix=tmp / "p", spin_stop=spin_stop),
        options.provider)
    for sess in (plain, profiled):
        timed(lambda s=sess: s.run(None, feed), 5)
    return plain, profiled, feed


def nodes_per_run(profiled: Any) -> float:
    path = Path(profiled.end_profiling())
    runs = split_runs(json.loads(path.read_text()))
    path.unlink()
    return float(np.median([len(r.nodes) for r in runs]))


def compare(model: str, args: argparse.Namespace) -> tuple[np.ndarray, float]:
    """Per repeat: plain and profiled median ms in wall time, then in the calling thread's CPU time;
    and the node events per run."""
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        plain, profiled, feed = sessions(model, args.threads, not args.keep_spinning, Path(tmp))
        for _ in range(args.repeats):
            a, b = interleaved(lambda: plain.run(None, feed), lambda: profiled.run(None, feed), args.runs,
                               block=args.block)
            out.append([float(np.median(x)) / 1e6 for x in (a.wall_ns, b.wall_ns, a.cpu_ns, b.cpu_ns)])
        return np.asarray(out), nodes_per_run(profiled)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="mobilenet_v2,resnet50", help="zoo names or .onnx paths, comma-separated")
    ap.add_argument("--runs", type=int, default=100, help="runs of each session per repeat")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--block", type=int, default=1, help="runs of one session before switching")
    ap.add_argument("--keep-spinning", action="store_true",
                    help="leave ONNX Runtime's spinning between runs on (the idle pool then competes)")
    args = ap.parse_args()
    print(f"{args.repeats} repeats of {args.runs} runs per session, alternating in blocks of {args.block}, "
          f"threads {args.threads or 'default'}, spinning {'kept' if args.keep_spinning else 'stopped'} "
          "between runs")
    print(f"{'model':24s} {'plain ms':>9s} {'prof. ms':>9s} {'ratio':>6s} {'µs/event':>9s} {'CPU µs/ev':>9s} "
          f"{'CPU share':>9s}  wall ratios per repeat")
    for model in args.models.split(","):
        per_repeat, nodes = compare(model, args)
        ratios = per_repeat[:, 1] / per_repeat[:, 0]
        plain, prof, plain_cpu, prof_cpu = np.median(per_repeat, axis=0)
        print(f"{Path(model).name:24s} {plain:9.2f} {prof:9.2f} {np.median(ratios):6.3f} "
              f"{(prof - plain) * 1e3 / nodes:9.2f} {(prof_cpu - plain_cpu) * 1e3 / nodes:9.2f} "
              f"{plain_cpu / plain:9.2f}  " + " ".join(f"{r:.3f}" for r in ratios) + f"  ({nodes:g} nodes per run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
