"""``layerperf bench OPTYPE|MODEL``: one operator, or one node of a model, measured in isolation."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from layerperf.bench.measure import DEFAULT_SAMPLES, DEFAULT_SPEED_WAIT_S, MIN_SAMPLES
from layerperf.cli.common import add_output_args, at_least, event_list, layout, output_format

if TYPE_CHECKING:
    from layerperf.bench import BenchResult

BENCH_BACKEND = "onnxruntime"
_OP_ONLY = ("input", "const", "attr", "sweep", "domain", "opset", "outputs")
_NODE_ONLY = ("shape", "inputs", "batch", "image_size", "seq_len")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "bench", help="measure one operator, or one node of a model, in isolation",
        description="Build a one-node ONNX model of OPTYPE (or take node --node of MODEL), then time it on "
                    "ONNX Runtime (or --backend): warm-up until timings settle, then --samples samples of enough "
                    "calls to last --min-time each. Prints min/median/mean/p90, stddev, CV, IQR outliers, FLOPs, "
                    "bytes and the peak memory of the run.",
        epilog="examples:\n"
               "  layerperf bench Conv --input X=1x64x56x56 --input W=64x64x3x3 --attr pads=1,1,1,1\n"
               "  layerperf bench MatMul --input A=128x768 --input B=768x3072 --threads 1,2\n"
               "  layerperf bench Relu --input X=1x64x56x56 --sweep X=1x64x28x28,1x64x56x56 --format csv\n"
               "  layerperf bench resnet18 --node layer1.0.conv1\n"
               "  layerperf bench resnet18 --node layer1.0.relu1_nchwc --opt-level all",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", metavar="OPTYPE|MODEL",
                   help="an operator type (Conv, MatMul...), or with --node an .onnx file or built-in model")
    op = p.add_argument_group("operator (OPTYPE)")
    op.add_argument("--input", "-i", action="append", default=[], metavar="NAME=DIMS[:dtype]",
                    help="an input by its schema name, e.g. X=1x3x224x224 or X=1x64:float16 (repeatable)")
    op.add_argument("--const", action="append", default=[], metavar="NAME=VALUES[:dtype]",
                    help="an input with fixed values (JSON), e.g. shape=[1,-1]:int64 (repeatable)")
    op.add_argument("--attr", "-a", action="append", default=[], metavar="KEY=VALUE",
                    help="an attribute, e.g. pads=1,1,1,1 or auto_pad=SAME_UPPER (repeatable)")
    op.add_argument("--domain", default="", help="operator domain, e.g. com.microsoft (default: ONNX)")
    op.add_argument("--opset", type=at_least(1), help="opset of the domain (default: newest supported)")
    op.add_argument("--outputs", type=at_least(1), help="how many outputs to produce (default: the required ones)")
    op.add_argument("--weights", default="auto", metavar="auto|inputs|initializers|NAME,...",
                    help="which inputs are initializers (default auto: layer parameters such as W, B)")
    op.add_argument("--sweep", action="append", default=[], metavar="NAME=DIMS1,DIMS2,...",
                    help="measure each shape of an input; several --sweep give every combination")
    node = p.add_argument_group("node of a model (MODEL --node NAME)")
    node.add_argument("--node", metavar="NAME", help="measure this node of MODEL alone (a name as `layerperf "
                      "profile` shows it; an unnamed node is <op_type>_<index>, as ONNX Runtime's profiler names it)")
    node.add_argument("--shape", action="append", default=[], metavar="NAME=DIMS",
                      help="set a model input's shape (repeatable)")
    node.add_argument("--inputs", metavar="FILE.npz",
                      help="the model's input arrays by input name, for the run that records the node's inputs "
                           "(the rest: seeded random data)")
    node.add_argument("--batch", type=int, help="batch size of a built-in model")
    node.add_argument("--image-size", type=int, help="input height and width of a built-in vision model")
    node.add_argument("--seq-len", type=int, help="sequence length of a built-in text model")
    run_g = p.add_argument_group("measurement")
    run_g.add_argument("--threads", default="1", metavar="N[,N...]",
                       help="intra-op threads (default 1; 0: runtime default); a list gives one row each")
    run_g.add_argument("--samples", type=at_least(MIN_SAMPLES), default=DEFAULT_SAMPLES,
                       help=f"timed samples (default {DEFAULT_SAMPLES})")
    run_g.add_argument("--min-time", default="1ms", help="least duration of one sample (default 1ms)")
    run_g.add_argument("--warmup-max", type=float, default=2.0, metavar="SECONDS",
                       help="longest warm-up when timings do not settle (default 2)")
    run_g.add_argument("--speed-wait", type=float, default=DEFAULT_SPEED_WAIT_S, metavar="SECONDS",
                       help="set aside samples taken while the CPU ran slowed, and sample up to this much "
                            f"longer for full-speed ones (default {DEFAULT_SPEED_WAIT_S:g}; 0: keep samples "
                            "at any speed)")
    run_g.add_argument("--opt-level", choices=["disable", "basic", "extended", "all"],
                       help="ONNX Runtime optimization level (default: basic for OPTYPE; for --node, disable: "
                            "the node as written in the model; another level takes it from the optimized graph)")
    run_g.add_argument("--events", metavar="E1,E2", type=event_list,
                       help="perf events to count per call, e.g. task-clock,cycles")
    run_g.add_argument("--provider", default="CPUExecutionProvider", help="execution provider")
    run_g.add_argument("--seed", type=at_least(0), default=0, help="seed of the random input data (default 0)")
    run_g.add_argument("--no-overhead", action="store_true", help="skip timing the empty run")
    run_g.add_argument("--backend", default=BENCH_BACKEND, metavar="NAME",
                       help=f"runtime to measure on (default {BENCH_BACKEND}; one that measures single operators)")
    co = p.add_argument_group("co-running (interference)")
    co.add_argument("--corun", metavar="OP:NAME=DIMS,...",
                    help="measure while this operator runs in a loop in another process, e.g. MatMul:A=512x512,"
                         "B=512x512 (its inputs by schema name)")
    cores = co.add_mutually_exclusive_group()
    cores.add_argument("--separate-cores", dest="corun_cores", action="store_const", const="separate",
                       help="the co-runner on other CPUs than the measured op (default; the op on the first "
                            "--threads CPUs)")
    cores.add_argument("--shared-cores", dest="corun_cores", action="store_const", const="shared",
                       help="the co-runner on the same CPUs as the measured op")
    p.set_defaults(corun_cores=None)
    add_output_args(p, ["table", "csv", "json"])
    p.set_defaults(func=run)


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def _check_mode(args: argparse.Namespace) -> None:
    from layerperf import backends
    from layerperf.errors import InputError

    backends.single_op(args.backend)  # unknown, unusable, or measuring no single operator: one line

    wrong, why = (_OP_ONLY, "take the shapes and attributes from the model") if args.node else (
        _NODE_ONLY, "apply to a model's node (--node)")
    for dest in wrong:
        if getattr(args, dest) not in (None, [], ""):
            raise InputError(f"{_flag(dest)} does not apply here: with{'' if args.node else 'out'} --node, "
                             f"the options {why}")
    if args.node and args.weights != "auto":
        raise InputError("--weights does not apply to --node: a node keeps the initializers it has in its model")


def _op_inputs(args: argparse.Namespace) -> dict[str, Any]:
    from layerperf.bench.build import InputArg
    from layerperf.bench.parse import parse_const, parse_input
    from layerperf.errors import InputError

    inputs: dict[str, Any] = {}
    for item in args.input:
        name, dims, dtype = parse_input(item)
        inputs[name] = InputArg(dims, dtype)
    for item in args.const:
        name, arr, dtype = parse_const(item)
        if name in inputs:
            raise InputError(f"input {name} is given twice (--input and --const)")
        inputs[name] = InputArg(tuple(arr.shape), dtype, arr)
    return inputs


def _not_an_op_hint(target: str) -> None:
    """A model given without --node reads as an unknown operator: say what was meant."""
    from pathlib import Path

    from layerperf.errors import InputError

    is_model = target.endswith(".onnx") or Path(target).is_file()
    if not is_model:
        from layerperf.models import zoo

        is_model = target in zoo.names()
    if is_model:
        raise InputError(f"{target} is a model: name the node to measure with --node NODE_NAME",
                         hint="`layerperf profile` lists a model's node names")


def _measure(args: argparse.Namespace, progress: Any) -> list[BenchResult]:
    from layerperf.bench import sweep_node, sweep_op
    from layerperf.bench.parse import parse_attr_item, parse_duration_ms, parse_sweep, parse_threads

    threads = parse_threads(args.threads)
    common: dict[str, Any] = {
        "samples": args.samples, "min_time_ms": parse_duration_ms(args.min_time), "provider": args.provider,
        "events": list(args.events or ()),
        "warmup_max_s": args.warmup_max, "overhead": not args.no_overhead, "progress": progress,
        "speed_wait_s": args.speed_wait, "backend": args.backend,
        # beside a co-runner on the op's own cores the op waits for it: that is the interference measured
        "set_aside": not (args.corun and args.corun_cores == "shared"),
    }
    if args.node:
        zoo = {k: v for k, v in (("batch", args.batch), ("image_size", args.image_size),
                                 ("seq_len", args.seq_len)) if v is not None}
        return sweep_node(args.target, args.node, threads=threads, opt_level=args.opt_level or "disable",
                          shapes=args.shape, seed=args.seed, zoo_options=zoo, inputs=args.inputs, **common)
    _not_an_op_hint(args.target)
    attrs = dict(parse_attr_item(a) for a in args.attr)
    sweep = dict(parse_sweep(s) for s in args.sweep)
    return sweep_op(args.target, _op_inputs(args), attrs, sweep=sweep, threads=threads, domain=args.domain,
                    opset=args.opset, weights=args.weights, outputs=args.outputs, seed=args.seed,
                    opt_level=args.opt_level or "basic", **common)


def run(args: argparse.Namespace) -> int:
    from layerperf.cli.common import progress_bar
    from layerperf.renderers.output import show
    from layerperf.renderers.views.bench import bench_view

    _check_mode(args)
    fmt = output_format(args)
    table_layout = layout(args, fmt)
    with progress_bar() as progress, _beside_corunner(args) as corun:
        results = _measure(args, progress)
    if corun:
        results = [_with_corun(r, corun) for r in results]
    many = len(results) > 1 or bool(args.sweep) or "," in str(args.threads)
    swept = [parse_name(s) for s in args.sweep] if not args.node else []
    show(bench_view(results, swept=swept, many=many), fmt, args.output, table_layout)
    return 0


def parse_name(item: str) -> str:
    return item.partition("=")[0].strip()


@contextlib.contextmanager
def _beside_corunner(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    """With --corun: the co-runner started and this process pinned as asked, for the measurement's length;
    what it was, filled in (its throughput) once it has stopped."""
    from layerperf.errors import InputError

    if not args.corun:
        if args.corun_cores:
            raise InputError(f"--{args.corun_cores}-cores applies to --corun")
        yield {}
        return
    from layerperf.bench.corun import CoRunner, CorunSpec, placement
    from layerperf.bench.parse import parse_threads
    from layerperf.util.affinity import format_cpus, pinned

    spec, cores = CorunSpec.parse(args.corun).checked(), args.corun_cores or "separate"
    run_cpus, corun_cpus = placement(None, max(parse_threads(args.threads)), cores)
    info: dict[str, Any] = {"op": spec.text(), "cores": cores, "run_cpus": format_cpus(run_cpus or ()),
                            "corun_cpus": format_cpus(corun_cpus)}
    runner = CoRunner(spec, corun_cpus, args.backend)
    with runner, pinned(run_cpus):
        yield info
    info["calls_per_s"] = runner.calls_per_s


def _with_corun(result: BenchResult, corun: dict[str, Any]) -> BenchResult:
    import dataclasses

    where = f"CPUs {corun['run_cpus']}" if corun["run_cpus"] else "every CPU"
    rate = f"{corun['calls_per_s']:.0f} calls/s" if corun.get("calls_per_s") else "its rate unknown"
    note = (f"measured beside {corun['op']} running in another process on CPUs {corun['corun_cpus']} "
            f"({corun['cores']} cores; {rate}); the op on {where}")
    if corun["cores"] == "shared":
        note += ("; no sample set aside (waiting for the co-runner is the interference: its mean and p90 say it, "
                 "not the median)")
    return dataclasses.replace(result, corun=dict(corun), warnings=(*result.warnings, note))
