"""The schedule each kernel of a build got, read from its MetaSchedule database.

Tuning records carry no task name: a record is found for a kernel the way
``MetaScheduleApplyDatabase`` finds it, by querying the database with the kernel's PrimFunc (as
the tunable module has it, before schedules are applied) — structural equality of the workload.
The trace is then replayed on that PrimFunc to read what the postprocessors made of it: which
loops ended up parallel, vectorized or unrolled, and their extents.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import tvm
from tvm import s_tir, tirx
from tvm.s_tir import meta_schedule as ms

from layerperf.backends.tvm.schedule import KernelSchedule, Loop, default_schedule, read_trace

_KINDS = {0: "serial", 1: "parallel", 2: "vectorized", 3: "unrolled", 4: "thread_binding"}


def open_database(work_dir: Path) -> Any:
    return ms.database.JSONDatabase(work_dir=str(work_dir), module_equality="structural")


def _children(stmt: Any) -> list[Any]:
    for attr in ("seq",):
        if hasattr(stmt, attr):
            return list(getattr(stmt, attr))
    if hasattr(stmt, "block"):
        return [stmt.block]
    out = [getattr(stmt, a) for a in ("body", "then_case", "else_case") if getattr(stmt, a, None) is not None]
    return out


def _loops(stmt: Any) -> Iterator[Any]:
    """Every For of a TIR statement, outermost first (no TIR visitor is exposed to Python in 0.27)."""
    todo = [stmt]
    while todo:
        node = todo.pop(0)
        if isinstance(node, tirx.For):
            yield node
        todo[:0] = _children(node)


def _extent(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def final_loops(func: Any) -> tuple[Loop, ...]:
    """The non-serial loops of a scheduled PrimFunc."""
    return tuple(Loop(str(f.loop_var.name), _extent(f.extent), _KINDS.get(int(f.kind), str(f.kind)))
                 for f in _loops(func.body) if int(f.kind) != 0)


def block_loops(mod: Any) -> dict[str, list[str]]:
    """Each block of an unscheduled PrimFunc (``mod["main"]``) -> its loop variables, outermost first."""
    out: dict[str, list[str]] = {}

    def walk(stmt: Any, loops: list[str]) -> None:
        if isinstance(stmt, tirx.For):
            walk(stmt.body, [*loops, str(stmt.loop_var.name)])
            return
        block = getattr(stmt, "block", None)
        if block is not None:
            out.setdefault(str(block.name_hint), loops)
            walk(block.body, [])
            return
        for child in _children(stmt):
            walk(child, loops)

    walk(mod["main"].body, [])
    return out


def _workload(func: Any) -> Any:
    return tvm.IRModule({"main": func.with_attr("global_symbol", "main")})


def kernel_schedule(database: Any, target: Any, name: str, func: Any) -> KernelSchedule:
    """The schedule the database holds for PrimFunc ``func`` (called ``name`` in the build), or
    :func:`~.schedule.default_schedule` when it holds none."""
    record = database.query_tuning_record(_workload(func), target, name)
    if record is None:
        return default_schedule(name)
    workload = record.workload.mod
    sch = s_tir.Schedule(workload)
    record.trace.apply_to_schedule(sch, remove_postproc=False)
    run_s = [float(s) for s in record.run_secs] if record.run_secs else []
    return read_trace(name, list(record.trace.as_python()), block_loops(workload),
                      sum(run_s) / len(run_s) if run_s else None, final_loops(sch.mod["main"]))


def kernel_schedules(work_dir: Path | None, target: Any, tunable: Any, names: list[str]) -> dict[str, KernelSchedule]:
    """Each named kernel's schedule; all default without a database. ``tunable``: the module after
    :func:`~.pipeline.tunable_module`, where the kernels' unscheduled PrimFuncs are."""
    if work_dir is None:
        return {n: default_schedule(n) for n in names}
    database = open_database(work_dir)
    funcs = {gv.name_hint: f for gv, f in tunable.functions.items() if isinstance(f, tirx.PrimFunc)}
    return {n: kernel_schedule(database, target, n, funcs[n]) if n in funcs else default_schedule(n) for n in names}
