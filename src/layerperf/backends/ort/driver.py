"""One profile on ONNX Runtime, start to end: inputs, profiled runs interleaved with plain ones,
layers from the events and the optimized graph, then counters and memory when asked."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import onnx
import onnxruntime as ort

from layerperf.analysis.memory.report import analyze_memory
from layerperf.backends.base import RunPlan
from layerperf.backends.common import profile_metadata, unknown_flops_warnings
from layerperf.backends.ort import arena
from layerperf.backends.ort.counting import apply_counts, count_layers
from layerperf.backends.ort.layers import build_layers_and_runs, graph_summary, layout_channels, unknown_cost_ops
from layerperf.backends.ort.measure import measure, prepare_feed
from layerperf.backends.ort.options import OrtOptions
from layerperf.cost.onnx.graph import tensor_infos
from layerperf.cost.onnx.layout import has_blocked
from layerperf.data.profile import CounterInfo, Profile
from layerperf.data.tensor import TensorInfo
from layerperf.models.source import ModelSource, open_model
from layerperf.util.malloc_trim import release

if TYPE_CHECKING:
    from layerperf.collectors import Collectors, CounterRequest

_T = TypeVar("_T")


def profile(model: Any, plan: RunPlan, options: OrtOptions, collectors: Collectors) -> Profile:
    plan.validate()
    options.validate()
    source = open_model(model, **plan.zoo_options)
    progress = collectors.progress
    # Each phase's sessions are released, and their memory handed back, before the next phase makes
    # its own: every session holds its own copy of the weights.
    feed = _released(prepare_feed(source, plan, options.provider))
    step = (lambda done: progress("profiled runs", done, plan.runs)) if progress else None
    m = _released(measure(source, plan, options, feed, step))
    origin = m.runs[0][0] if m.runs else 0
    channels = layout_channels(m.runs, m.optimized, source.proto, _original_shapes(source, feed, m.optimized))
    layers, run_list = build_layers_and_runs(m.runs, m.optimized, origin, source.proto, channels)
    prof = Profile(
        metadata=profile_metadata(source, plan, "onnxruntime", ort.__version__, options.provider, options),
        layers=layers, runs=run_list, latency_ns=m.plain.wall_ns, profiled_latency_ns=m.profiled.wall_ns,
        latency_cpu_ns=m.plain.cpu_ns, profiled_cpu_ns=m.profiled.cpu_ns if m.plain.cpu_ns else [],
        graph=graph_summary(m.optimized), measurement=m.setup(feed),
        warnings=_cost_warnings(unknown_cost_ops(layers), len(channels.unresolved)))
    if collectors.counters:
        prof.counters = _count(source, plan, options, feed, layers, collectors.counters, progress)
    if collectors.memory:
        runtime = arena.measure(source, plan, options, feed, [layer.name for layer in layers],
                                     collectors.memory.sample_rate)
        prof.memory = analyze_memory(prof, runtime)
        _released(None)
    return prof


def _original_shapes(source: ModelSource, feed: dict[str, Any], optimized: onnx.ModelProto | None) -> Any:
    """The original model's tensors at the fed shapes, only when a blocked layout needs them."""
    if not has_blocked(optimized):
        return None
    given = {k: TensorInfo(k, tuple(v.shape), str(v.dtype)) for k, v in feed.items()}
    return tensor_infos(source.proto, given)


def _cost_warnings(unknown_ops: list[str], unresolved: int) -> list[str]:
    out = unknown_flops_warnings(unknown_ops)
    if unresolved:
        out.append(f"{unresolved} tensors in ONNX Runtime's NCHWc layout have no known real channel count: "
                   "their layers count the stored (possibly padded) channels")
    return out


def _released(value: _T) -> _T:
    """``value``, once the sessions that made it are gone and their memory is back with the system."""
    release()
    return value


def _count(source: ModelSource, plan: RunPlan, options: OrtOptions, feed: Any, layers: Any,
           request: CounterRequest, progress: Callable[[str, int, int], None] | None) -> CounterInfo:
    if progress:
        progress("counting (stepwise)", 0, 1)
    worker_opts = {"opt_level": options.opt_level, "provider": options.provider, "threads": plan.threads}
    # body nodes of control flow run inside their parent: the stepwise executor gets (and refuses) the parent
    order = [layer.name for layer in layers if layer.parent is None]
    result = count_layers(source.path, worker_opts, feed, order, request, source.data_dir)
    if progress:
        progress("counting (stepwise)", 1, 1)
    return apply_counts(layers, result, request)
