"""The onnx package's node tests as a robustness suite: every model either profiles or is refused in one line.

Each test case of ``onnx.backend.test.case.node.collect_testcases()`` (one or a few nodes, with the
inputs the test runs them on) is saved to a temporary directory with its inputs as an ``.npz`` and
profiled by ``layerperf.profile`` with few runs and latency off. A case ends one of three ways:

- profiled: a Profile came back;
- refused: a LayerperfError, the one-line message the command line prints with exit code 2;
- crashed: any other exception, the traceback a user would see: each one is a bug.

Inputs the ``.npz`` cannot carry (a sequence, an empty optional) are left out, so layerperf itself
has to generate them or refuse them. ``--random`` leaves every input out: layerperf's seeded random
data is then fed to every input type the tests use.

    python benchmarks/node_tests.py                  # all of them, counts by outcome and reason
    python benchmarks/node_tests.py --sample 40 --seed 0 -v
"""

from __future__ import annotations

import argparse
import collections
import random
import re
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from layerperf.data.tensor import lacks_numpy, numpy_dtype, onnx_elem_to_dtype

PROFILE_OPTIONS: dict[str, Any] = {"warmup": 0, "runs": 1, "latency": False, "threads": 1}
REASON_WORDS = 8


@dataclass(frozen=True, slots=True)
class Outcome:
    name: str
    status: str  # "profiled", "refused" or "crashed"
    message: str = ""
    wall_s: float = 0.0


def cases() -> list[Any]:
    """Every node test case of the installed onnx package, in its order."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():  # the test generators' own numpy overflow warnings
        warnings.simplefilter("ignore")
        return list(collect_testcases(None))  # onnx 1.16 requires the argument


def sample(all_cases: Sequence[Any], n: int | None, seed: int) -> list[Any]:
    if n is None or n >= len(all_cases):
        return list(all_cases)
    return random.Random(seed).sample(list(all_cases), n)


def _array(value: Any, elem_type: int) -> np.ndarray | None:
    """A test input as an .npz holds it, or None where it cannot (a sequence, an empty optional)."""
    if isinstance(value, onnx.TensorProto):
        value = onnx.numpy_helper.to_array(value)
    if not isinstance(value, np.ndarray | np.generic):
        return None
    arr = np.asarray(value)
    if arr.dtype == object:  # strings: an .npz holds object arrays only pickled, unicode ones plainly
        return arr.astype(str)
    want = numpy_dtype(onnx_elem_to_dtype(elem_type)) if elem_type else None
    if want is not None and lacks_numpy(want):  # as layerperf's README says to store the types numpy lacks
        arr = arr.astype(want)  # older onnx gives float8 test data as float32
        integer = want.name.startswith(("int", "uint"))
        return arr.astype(np.int8) if integer else arr.view(f"u{arr.dtype.itemsize}")
    return arr


def write_inputs(case: Any, path: Path) -> Path | None:
    """Save the case's first data set as ``path`` (.npz), by graph input name; None when none fits."""
    inputs = case.data_sets[0][0] if case.data_sets else []
    arrays = {vi.name: arr for vi, value in zip(case.model.graph.input, inputs, strict=False)
              if (arr := _array(value, vi.type.tensor_type.elem_type)) is not None}
    if not arrays:
        return None
    np.savez(path, **arrays)  # type: ignore[arg-type]
    return path


def named(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy whose unnamed nodes have the names ONNX Runtime's profile gives them (op type _ position)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for i, node in enumerate(copy.graph.node):
        node.name = node.name or f"{node.op_type}_{i}"
    return copy


def run_case(case: Any, workdir: Path, *, random_inputs: bool = False, name_nodes: bool = False,
             **options: Any) -> Outcome:
    import layerperf
    from layerperf.errors import LayerperfError

    t0 = time.perf_counter()
    model_path = workdir / f"{case.name}.onnx"
    onnx.save(named(case.model) if name_nodes else case.model, model_path)
    inputs = None if random_inputs else write_inputs(case, workdir / f"{case.name}.npz")
    try:
        layerperf.profile(model_path, inputs=inputs, **{**PROFILE_OPTIONS, **options})
    except LayerperfError as exc:
        return Outcome(case.name, "refused", str(exc), time.perf_counter() - t0)
    except Exception as exc:  # anything else is a traceback for the user: a bug to fix
        where = traceback.extract_tb(exc.__traceback__)[-1]
        message = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''} " \
                  f"[{Path(where.filename).name}:{where.lineno}]"
        return Outcome(case.name, "crashed", message, time.perf_counter() - t0)
    finally:
        model_path.unlink(missing_ok=True)
    return Outcome(case.name, "profiled", "", time.perf_counter() - t0)


def reason(message: str) -> str:
    """The first words of a refusal with the case-specific parts (paths, names, numbers) blanked."""
    text = re.sub(r"(?:/[\w.+-]+)+", "PATH", message)
    text = re.sub(r"'[^']*'", "'…'", text)
    text = re.sub(r"\d+", "N", text)
    return " ".join(text.split()[:REASON_WORDS])


def summary(outcomes: Sequence[Outcome], wall_s: float) -> list[str]:
    by_status = collections.Counter(o.status for o in outcomes)
    lines = [f"{len(outcomes)} node test models in {wall_s:.1f} s: {by_status['profiled']} profiled, "
             f"{by_status['refused']} refused, {by_status['crashed']} crashed"]
    for status in ("refused", "crashed"):
        reasons = collections.Counter(reason(o.message) for o in outcomes if o.status == status)
        if reasons:
            lines.append(f"{status} by reason:")
            lines += [f"  {n:5d}  {r}" for r, n in reasons.most_common()]
    return lines


def run_all(selected: Iterable[Any], *, random_inputs: bool = False, name_nodes: bool = False,
            verbose: bool = False, **options: Any) -> list[Outcome]:
    """Profile each case (``options``: more ``layerperf.profile`` keywords); one Outcome each."""
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="layerperf-nodes-") as tmp:
        for case in selected:
            outcome = run_case(case, Path(tmp), random_inputs=random_inputs, name_nodes=name_nodes, **options)
            outcomes.append(outcome)
            if verbose or outcome.status == "crashed":
                print(f"{outcome.status:8s} {outcome.name}: {outcome.message}", flush=True)
    return outcomes


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sample", type=int, help="profile this many cases, drawn with --seed (default: all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--match", help="only the cases whose name matches this regular expression")
    p.add_argument("--random", action="store_true", help="no --inputs: layerperf generates every input")
    p.add_argument("--latency", action="store_true", help="measure latency too (profiler off)")
    p.add_argument("--memory", action="store_true", help="take the memory profile too")
    p.add_argument("--events", action="append", help="count this perf event too (the stepwise executor)")
    p.add_argument("--name-nodes", action="store_true",
                   help="name the unnamed nodes first (--events matches nodes by name in the optimized graph)")
    p.add_argument("-v", "--verbose", action="store_true", help="one line per case")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    selected = [c for c in cases() if not args.match or re.search(args.match, c.name)]
    outcomes = run_all(sample(selected, args.sample, args.seed), random_inputs=args.random,
                       name_nodes=args.name_nodes, verbose=args.verbose,
                       latency=args.latency, memory=args.memory, events=args.events)
    for line in summary(outcomes, time.perf_counter() - t0):
        print(line)
    return 1 if any(o.status == "crashed" for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
