"""A Profile from what a torch run recorded: the layers and their runs, the plain runs beside them, the
model's graph summary and the warnings on its costs. The backend (:mod:`.driver`, levels 1 and 2) and
the in-code API (:mod:`layerperf.torch`) build their profiles here alike."""

from __future__ import annotations

from collections.abc import Sequence

from layerperf.backends.common import RunTimes, unknown_flops_warnings
from layerperf.backends.torch.models import TorchModel
from layerperf.backends.torch.record import Recorder, Seen, input_names
from layerperf.data.metadata import Metadata
from layerperf.data.profile import CostNesting, GraphSummary, Layer, Measurement, Profile, Run


def build_profile(metadata: Metadata, layers: list[Layer], runs: list[Run], *, level: int,
                  warnings: list[str], graph: GraphSummary | None, plain: RunTimes | None = None,
                  profiled_cpu_ns: Sequence[int] = (), measurement: Measurement | None = None) -> Profile:
    """The profile of ``runs`` over ``layers``. ``plain``: the plain runs the profiled ones alternated
    with (none in code), whose latencies the profiled runs' wall and CPU times (``profiled_cpu_ns``) are
    set beside. At level 1 a module's work is its own (:attr:`CostNesting.SELF`); at level 2 it is all on
    the op rows under it, its own figures unknown, so totals count the rows that are no parent
    (:attr:`CostNesting.INCLUSIVE`)."""
    wall, cpu = (plain.wall_ns, plain.cpu_ns) if plain is not None else ([], [])
    return Profile(metadata=metadata, layers=layers, runs=runs, latency_ns=wall,
                   profiled_latency_ns=[r.dur_ns for r in runs] if wall else [], latency_cpu_ns=cpu,
                   profiled_cpu_ns=list(profiled_cpu_ns) if cpu else [], graph=graph, measurement=measurement,
                   warnings=warnings, cost_nesting=CostNesting.SELF if level == 1 else CostNesting.INCLUSIVE)


def graph_summary(model: TorchModel, rec: Recorder) -> GraphSummary:
    """The model's inputs (its forward's parameter names), outputs (the last top-level module's, under
    the root's row where it is one) and parameters' bytes."""
    params = {name: p.numel() * p.element_size() for name, p in model.module.named_parameters()}
    top = 0 if rec.root_row else None
    tops = [s for s in rec.seen if s.parent == top]
    outputs = tuple(t.name for t in tops[-1].outputs) if tops else ()
    return GraphSummary(tuple(n for n, _ in input_names(model)), outputs, params)


def unknown_ops_warnings(seen: list[Seen]) -> list[str]:
    """The aten ops that made a row's FLOPs or integer operations unknown (no flop_counter formula)."""
    out = unknown_flops_warnings((op for s in seen for op in s.unknown_ops),
                                 "aten ops (no formula in torch.utils.flop_counter nor in layerperf's cost model)")
    unknown_int = sorted({op for s in seen for op in s.unknown_int_ops})
    if unknown_int:
        out.append("integer operations unknown for aten ops on integer tensors (no torch.utils.flop_counter "
                   f"formula): {', '.join(unknown_int)}")
    return out
