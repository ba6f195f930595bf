"""Peak resident memory of ``layerperf.profile`` against model size, each model in a fresh process.

Each profile runs in its own child process; the figure is the child's own high-water mark
(``VmHWM`` of /proc/self/status, read as it ends) and, beside it, what ``wait4`` reports for the
child and the processes it waited for (the counting worker of ``--events``: the largest of them,
not a sum). The child also reads its resident memory after importing layerperf, ONNX Runtime and
onnx, before touching the model: the baseline every profile pays whatever the model. For scale,
another child makes one plain ONNX Runtime session of the model and runs it once: what the
runtime itself takes, which no profile can go below.

    python benchmarks/peak_rss.py                                  # zoo models, offline
    python benchmarks/peak_rss.py --models resnet50 path/to/model.onnx --events
    python benchmarks/peak_rss.py --before /tmp/main-src --repeat 2  # old sources side by side

Zoo models are built (and cached) before any measurement, in a process of their own, so the build
is not counted. ``--before DIR`` names another checkout's ``src`` folder: every model is then
profiled with both, alternately, and a line gives the ratio of their peaks.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE_SRC = Path(__file__).resolve().parent.parent / "src"
DEFAULT_MODELS = "mobilenet_v2,resnet18,resnet50,bert-base"
MIB = 1024 * 1024


def status_kib(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


def _model_path(model: str) -> Path:
    from layerperf.models import zoo

    return Path(model) if Path(model).suffix == ".onnx" or Path(model).exists() else zoo.path(model)


def _one_session(model: str) -> None:
    """A plain session with ONNX Runtime's defaults, run once on layerperf's seeded inputs."""
    import onnxruntime as ort

    from layerperf.backends.ort.measure import input_specs
    from layerperf.models.inputs import make_feed
    from layerperf.models.skeleton import read_skeleton

    path = _model_path(model)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    sess.run(None, make_feed(read_skeleton(path), input_specs(sess)))


def child(args: argparse.Namespace) -> int:
    """In the child: import, note the baseline, profile (or make one session), report the high-water mark."""
    import onnx  # noqa: F401  (part of the baseline either way)
    import onnxruntime  # noqa: F401

    import layerperf

    baseline = status_kib("VmRSS") * 1024
    if args.session:
        _one_session(args.child)
    else:
        extra = {"events": ["task-clock"]} if args.events else {}
        layerperf.profile(args.child, runs=args.runs, warmup=args.warmup, memory=args.memory, **extra)
    print(json.dumps({"baseline_bytes": baseline, "hwm_bytes": status_kib("VmHWM") * 1024}))
    return 0


def model_bytes(model: str) -> int:
    """The file's size plus the external data files it names (each counted once)."""
    import onnx

    path = _model_path(model)
    proto = onnx.load(str(path), load_external_data=False)
    files = {entry.value for t in proto.graph.initializer for entry in t.external_data if entry.key == "location"}
    return path.stat().st_size + sum((path.parent / f).stat().st_size for f in files)


def measure(model: str, src: Path, args: argparse.Namespace, session: bool = False) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", model, "--runs", str(args.runs), "--warmup", str(args.warmup)]
    cmd += ["--events"] * args.events + ["--memory"] * args.memory + ["--session"] * session
    env = {**os.environ, "PYTHONPATH": str(src)}
    with tempfile.TemporaryFile("w+") as err:
        # Not communicate(): it reaps the child, and wait4 is what gives this child's own rusage.
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, env=env, text=True)
        assert proc.stdout is not None
        out = proc.stdout.read()
        proc.stdout.close()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            err.seek(0)
            return {"error": (err.read().strip().splitlines() or ["?"])[-1]}
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    result["tree_hwm_bytes"] = usage.ru_maxrss * 1024
    return result


def prebuild(models: list[str]) -> list[tuple[str, int]]:
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import json; from peak_rss import model_bytes; "
            "print(json.dumps([model_bytes(m) for m in sys.argv[2:]]))")
    env = {**os.environ, "PYTHONPATH": str(HERE_SRC)}
    out = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent), *models], env=env,
                         capture_output=True, text=True, check=True).stdout
    return list(zip(models, json.loads(out), strict=True))


def row(model: str, size: int, label: str, r: dict[str, Any], floor: dict[str, Any]) -> str:
    head = f"{Path(model).name[:24]:24s} {label:7s} {size / MIB:8.1f}"
    if "error" in r:
        return f"{head}  failed: {r['error']}"
    base, hwm = r["baseline_bytes"], r["hwm_bytes"]
    x_ort = "     ?"
    if "error" not in floor:
        x_ort = f"{(hwm - base) / (floor['hwm_bytes'] - floor['baseline_bytes']):6.2f}"
    return (f"{head} {base / MIB:8.1f} {hwm / MIB:8.1f} {hwm / size:6.2f} {(hwm - base) / size:6.2f} {x_ort} "
            f"{r['tree_hwm_bytes'] / MIB:8.1f}")


HEADER = (f"{'model':24s} {'src':7s} {'size MiB':>8s} {'base MiB':>8s} {'peak MiB':>8s} {'x size':>6s} "
          f"{'-base':>6s} {'x ort':>6s} {'tree MiB':>8s}")
LEGEND = ("peak: the child's VmHWM; x size: peak / model bytes; -base: (peak - RSS after imports) / model bytes;\n"
          "x ort: (peak - base) / the same for one plain ONNX Runtime session (row 'ort'); tree: wait4's ru_maxrss\n"
          "(the child or its largest waited-for descendant, e.g. the counting worker)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", help="extra .onnx files to profile after the zoo models")
    ap.add_argument("--models", default=DEFAULT_MODELS, help=f"zoo models, comma-separated ({DEFAULT_MODELS})")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--events", action="store_true", help="add --events task-clock (the counting worker)")
    ap.add_argument("--memory", action="store_true", help="add the memory profile")
    ap.add_argument("--before", type=Path, help="another checkout's src folder, profiled alternately")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--session", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)
    models = [m for m in args.models.split(",") if m] + args.paths
    sources = [("before", args.before), ("after", HERE_SRC)] if args.before else [("profile", HERE_SRC)]
    print(HEADER)
    for model, size in prebuild(models):
        floor = measure(model, HERE_SRC, args, session=True)
        print(row(model, size, "ort", floor, floor), flush=True)
        peaks: dict[str, list[int]] = {}
        for _ in range(args.repeat):
            for label, src in sources:
                r = measure(model, src, args)
                if "error" not in r:
                    peaks.setdefault(label, []).append(r["hwm_bytes"])
                print(row(model, size, label, r, floor), flush=True)
        if args.before and len(peaks) == 2:
            before, after = min(peaks["before"]), min(peaks["after"])
            print(f"{Path(model).name[:24]:24s} after/before peak (min of {args.repeat}): {after / before:.2f} "
                  f"({before / MIB:.0f} -> {after / MIB:.0f} MiB)", flush=True)
    print(LEGEND)
    return 0


if __name__ == "__main__":
    sys.exit(main())
