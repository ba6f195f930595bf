"""What ONNX Runtime's profiler costs, derived from a Profile whose plain and profiled runs alternated.

The profiler adds a few µs per node event; on a model of many short nodes that is a large part of
each layer's measured time. The figures here say how large (per event, in wall and in CPU time),
which layers it swamps, and whether the host was too busy for wall times to mean much.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from layerperf.data.figures import distribution, known, median
from layerperf.data.table import LayerStats

if TYPE_CHECKING:
    from layerperf.data.profile import Profile

# Above this ratio of profiled to plain latency the profiler's own cost is worth a warning.
OVERHEAD_WARN = 1.10
# A layer whose median is under this many per-node event costs is timed with a cost as large as its own.
SMALL_LAYER_EVENTS = 3
# Below this share of a plain run's wall time on the CPU, the calling thread was preempted enough
# for wall times to be inflated: the host was busy.
BUSY_CPU_SHARE = 0.8


def _per_event(profiled_us: float | None, plain_us: float | None, nodes: float | None) -> float | None:
    return (profiled_us - plain_us) / nodes if nodes and profiled_us and plain_us else None


def cpu_share(profile: Profile) -> float | None:
    """Median share of a plain run's wall time the calling thread spent on the CPU. The CPU readings
    bracket the wall readings and hold the CPU clock's own reads (a system call, ~0.4 µs on this
    project's VM), so a run of a few µs reads a little over 1 (~1.05 at 16 µs)."""
    cpu = np.asarray(profile.latency_cpu_ns, dtype=np.float64)
    wall = np.asarray(profile.latency_ns, dtype=np.float64)
    if not cpu.size or cpu.size != wall.size or not (wall > 0).all():
        return None
    return median(cpu / wall)


def figures(profile: Profile, stats: Sequence[LayerStats], latency_med: float | None,
            profiled_med: float | None, layers_sum: float) -> dict[str, Any]:
    """Per-event cost in wall and CPU time, the least of it inside the layer times, the layers it may
    swamp, the host's business, warnings."""
    nodes = known(median([len(r.spans) for r in profile.runs]))
    wall_cost = _per_event(profiled_med, latency_med, nodes)
    cpu_cost = _per_event(known(distribution(profile.profiled_cpu_ns).median_us),
                          known(distribution(profile.latency_cpu_ns).median_us), nodes)
    # preemption inflates wall time only, so the CPU-time figure is the estimate when there is one
    cost = cpu_cost if cpu_cost is not None else wall_cost
    # Layer times that sum past the plain run must hold that much of the cost; below it, how much
    # falls inside a layer's span is not measured (the plain run's gaps between layers hide it).
    inside = max(layers_sum - latency_med, 0.0) / nodes if nodes and latency_med else None
    small = None if cost is None or cost <= 0 else sum(
        1 for st in stats if st.calls and st.median_us < SMALL_LAYER_EVENTS * cost)
    share = cpu_share(profile)
    return {
        "nodes_per_run": nodes, "profiler_event_cost_us": wall_cost, "profiler_event_cost_cpu_us": cpu_cost,
        "profiler_cost_in_layers_min_us": inside, "profiler_small_layers": small, "caller_cpu_share": share,
        "profiler_warning": _warning(latency_med, profiled_med, layers_sum, cost, inside, small, len(stats)),
        "busy_host_warning": _busy(share),
    }


def _warning(latency_med: float | None, profiled_med: float | None, layers_sum: float, cost: float | None,
             inside: float | None, small: int | None, n_layers: int) -> str | None:
    if not latency_med or not profiled_med:
        return None
    why = []
    if profiled_med / latency_med > OVERHEAD_WARN:
        why.append(f"the profiler adds {100 * (profiled_med / latency_med - 1):.0f}% to a run")
    if layers_sum > latency_med:
        ratio = layers_sum / latency_med  # 3 decimals where 2 would read 1.00x
        why.append(f"the layer medians sum to {ratio:.2f}x the plain latency" if round(ratio, 2) > 1 else
                   f"the layer medians sum to {ratio:.3f}x the plain latency")
    if not why:
        return None
    text = "; ".join(why)
    if cost is None or cost <= 0:
        return text
    text += f"; each node event costs about {cost:.1f} µs"
    if not inside:
        text += ", how much of it inside the layer times is not measured"
    elif inside < cost:
        text += f", at least {inside:.1f} µs of it inside the layer times"
    else:  # the layers' excess over the plain run is more than the whole cost: the host's noise on top
        text += ", all of it inside the layer times (their sum exceeds the plain run by more than that)"
    if not small:
        return text
    return text + (f"; the {small} of {n_layers} layers with a median under {SMALL_LAYER_EVENTS} event costs "
                   f"({SMALL_LAYER_EVENTS * cost:.1f} µs) may carry a profiler cost as large as their own time: "
                   "their times and ranks are uncertain")


def _busy(share: float | None) -> str | None:
    if share is None or share >= BUSY_CPU_SHARE:
        return None
    return (f"busy host: the calling thread was on the CPU for {100 * share:.0f}% of a plain run's wall time "
            "(median), so wall times (latency, the per-event cost in wall time) are inflated by preemption; "
            "the overhead ratio and CPU times hold better")


def measurement(profile: Profile) -> dict[str, Any]:
    """How the figures were taken (threads really used, inputs, latency interleaved or not)."""
    setup = profile.measurement
    if setup is None:
        return {"latency_interleaved": None, "intra_op_threads": None, "inputs": None}
    return {"latency_interleaved": setup.latency == "interleaved", "intra_op_threads": setup.intra_op_threads,
            "inputs": setup.inputs}
