"""Sweeps: one measurement per combination of input shapes and thread counts.

Input size and thread count are the two factors of an operator's speed a sweep varies; every
combination of the ``sweep`` values (in the order given, the last varying fastest) and ``threads``
gives one BenchResult, hence one row.
"""

from __future__ import annotations

import csv
import io
import itertools
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import onnx

from layerperf.bench.api import BenchSettings, measure_one, settings_from
from layerperf.bench.build import InputArg, InputLike, as_input_arg, build_op
from layerperf.bench.extract import extract_node
from layerperf.bench.parse import Dims, parse_dims
from layerperf.bench.result import BenchResult
from layerperf.bench.runtime import AS_WRITTEN
from layerperf.errors import InputError

DimsLike = str | Sequence[int]
Progress = Callable[[str, int, int], None]


def _dims(name: str, value: DimsLike) -> Dims:
    if isinstance(value, str):
        return parse_dims(value, f"--sweep {name} dims")
    return as_input_arg(name, value).shape


def combinations(sweep: Mapping[str, Sequence[DimsLike]], threads: Sequence[int]) -> list[tuple[dict[str, Dims], int]]:
    """Every (shapes of the swept inputs, thread count), the thread count varying fastest."""
    names = list(sweep)
    for name in names:
        if not sweep[name]:
            raise InputError(f"--sweep {name} has no values")
    if not threads:
        raise InputError("--threads is empty")
    values = [[_dims(n, v) for v in sweep[n]] for n in names]
    return [(dict(zip(names, combo, strict=True)), t) for combo in itertools.product(*values) for t in threads]


def _with_shapes(inputs: Mapping[str, InputLike], shapes: Mapping[str, Dims]) -> dict[str, InputLike]:
    out: dict[str, InputLike] = dict(inputs)
    for name, dims in shapes.items():
        base = as_input_arg(name, inputs[name]) if name in inputs else InputArg(dims)
        if base.value is not None:
            raise InputError(f"--sweep {name}: that input is a constant with fixed values")
        out[name] = InputArg(dims, base.dtype)
    return out


def sweep_op(op_type: str, inputs: Mapping[str, InputLike], attrs: Mapping[str, Any] | None = None, *,
             sweep: Mapping[str, Sequence[DimsLike]] | None = None, threads: Sequence[int] = (1,),
             domain: str = "", opset: int | None = None, weights: str | Sequence[str] = "auto",
             outputs: int | None = None, seed: int = 0, progress: Progress | None = None,
             **settings: Any) -> list[BenchResult]:
    """``bench_op`` for every combination of ``sweep`` shapes (input name -> dims list) and ``threads``.

    ``settings`` are bench_op's timing options (samples, min_time_ms, opt_level, events...).
    Every model is built and checked before the first measurement, so a bad combination fails fast.
    """
    base = _checked(settings_from(**settings), threads)
    combos = combinations(sweep or {}, threads)
    models = []
    for shapes, _ in combos:
        try:
            models.append(build_op(op_type, _with_shapes(inputs, shapes), attrs, domain=domain, opset=opset,
                                   weights=weights, n_outputs=outputs, seed=seed))
        except InputError as exc:
            if not shapes:
                raise
            at = ", ".join(f"{n}={'x'.join(map(str, d))}" for n, d in shapes.items())
            raise InputError(f"sweep {at}: {exc.message}", hint=exc.hint) from None
    return _measure_all(models, [t for _, t in combos], base, progress=progress)


def _measure_all(models: Sequence[Any], threads: Sequence[int], base: BenchSettings,
                 run_opt_level: str | None = None, progress: Progress | None = None) -> list[BenchResult]:
    overhead: dict[int, float | None] = {}  # one empty-run figure per thread count
    results = []
    for i, (one, t) in enumerate(zip(models, threads, strict=True)):
        r = measure_one(one, base.with_threads(t), run_opt_level=run_opt_level, overhead_us=overhead.get(t))
        overhead[t] = r.overhead_us
        results.append(r)
        if progress:
            progress("measured combinations", i + 1, len(models))
    return results


def _checked(base: BenchSettings, threads: Sequence[int]) -> BenchSettings:
    """``base``, every thread count of the sweep checked first (not after the rows before it ran)."""
    for t in threads:
        base.with_threads(t).validate()
    return base


def sweep_node(model: str | Path | onnx.ModelProto, node: str, *, threads: Sequence[int] = (1,),
               opt_level: str = "disable", shapes: Sequence[str] = (), seed: int = 0,
               zoo_options: Mapping[str, int] | None = None, progress: Progress | None = None,
               inputs: str | Path | None = None, **settings: Any) -> list[BenchResult]:
    """``bench_node`` once per thread count; the node is extracted once."""
    base = _checked(settings_from(opt_level=opt_level, **settings), threads)
    one = extract_node(model, node, opt_level=opt_level, shapes=shapes, provider=base.provider, seed=seed,
                       inputs=inputs, backend=base.backend, **dict(zoo_options or {}))
    return _measure_all([one] * len(threads), list(threads), base, run_opt_level=AS_WRITTEN, progress=progress)


def csv_text(results: Sequence[BenchResult]) -> str:
    """The rows of ``results`` as CSV, with a header; columns are the union of the rows' keys."""
    rows = [r.row() for r in results]
    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(row))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return buf.getvalue()
