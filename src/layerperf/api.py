"""The Python API: ``layerperf.profile(model, **options) -> Profile``."""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import onnx

from layerperf import __version__
from layerperf.errors import InputError
from layerperf.machine import fingerprint
from layerperf.model_source import ModelSource, open_model
from layerperf.profile_data import Profile

_T = TypeVar("_T")


def _zoo_options(batch: int | None, image_size: int | None, seq_len: int | None) -> dict[str, int]:
    given = {"batch": batch, "image_size": image_size, "seq_len": seq_len}
    return {k: v for k, v in given.items() if v is not None}


def _metadata(source: ModelSource, zoo_opts: dict[str, int], opts: Any, backend_version: str) -> dict[str, Any]:
    return {
        "layerperf_version": __version__,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "pid": os.getpid(),
        "model": {**source.describe(), **({"zoo_options": zoo_opts} if source.zoo else {})},
        "backend": "onnxruntime",
        "backend_version": backend_version,
        "provider": opts.provider,
        "options": opts.to_json(),
        "machine": fingerprint(),
    }


def profile(model: str | Path | onnx.ModelProto, *, warmup: int = 10, runs: int = 100, threads: int = 0,
            opt_level: str = "all", provider: str = "CPUExecutionProvider", shapes: Sequence[str] = (),
            inputs: str | Path | None = None, seed: int = 0, batch: int | None = None,
            image_size: int | None = None, seq_len: int | None = None, latency: bool = True,
            max_events: int = 1_000_000, events: Sequence[str] | None = None,
            perf_config: str | Path | None = None, passes: int = 5, multiplex: bool = False,
            memory: bool = False, sample_rate: int | None = None,
            progress: Callable[[str, int, int], None] | None = None) -> Profile:
    """Profile ``model`` (an .onnx path, a zoo name or a ModelProto) layer by layer on ONNX Runtime.

    Per-node timings are ONNX Runtime's own, taken in situ over ``runs`` measured runs after
    ``warmup``; whole-model latency is measured with the profiler off on a plain session whose
    runs alternate with the profiled ones (``latency=False`` skips it).

    ``events`` (perf event strings) or ``perf_config`` (a JSON file mapping event string to label)
    add per-node perf counters, read at node boundaries by the stepwise executor over ``passes``
    passes; ``multiplex`` counts every event in one pass group, scaled by the time it was counted.

    ``memory`` adds the memory profile (``extra["memory"]``, see :mod:`layerperf.memory`), with
    resident memory sampled every ``sample_rate`` nodes (default 1; 0: off).
    """
    import onnxruntime as ort

    from layerperf.backends.ort import sessions as backend
    from layerperf.backends.ort.counting import CounterRequest
    from layerperf.backends.ort.layers import build_layers_and_runs, graph_summary, layout_channels, unknown_cost_ops

    opts = backend.ProfileOptions(warmup=warmup, runs=runs, threads=threads, opt_level=opt_level,
                                  provider=provider, shapes=tuple(shapes),
                                  inputs_file=str(inputs) if inputs else None, seed=seed, latency=latency,
                                  max_events=max_events)
    opts.validate()
    request = CounterRequest.build(list(events or []), perf_config, passes, multiplex)
    if request:
        request.check()  # an unusable event fails now, not after minutes of profiling
    from layerperf.memory import MemoryRequest

    mem_request = MemoryRequest.make(memory, sample_rate)
    zoo_opts = _zoo_options(batch, image_size, seq_len)
    if not isinstance(model, onnx.ModelProto) and zoo_opts and Path(str(model)).suffix == ".onnx":
        raise InputError("--batch/--image-size/--seq-len apply to built-in models only",
                         hint="use --shape NAME=DIMS for an .onnx file")
    source = open_model(model, **zoo_opts)
    # Each phase's sessions are released, and their memory handed back, before the next phase makes
    # its own: every session holds its own copy of the weights.
    feed = _released(backend.prepare_feed(source, opts))
    step = (lambda done: progress("profiled runs", done, runs)) if progress else None
    m = _released(backend.measure(source, opts, feed, step))
    origin = m.runs[0][0] if m.runs else 0
    channels = layout_channels(m.runs, m.optimized, source.proto, _original_shapes(source, feed, m.optimized))
    layers, run_list = build_layers_and_runs(m.runs, m.optimized, origin, source.proto, channels)
    extra: dict[str, Any] = {"profiled_latency_ns": m.wall_ns, "graph": graph_summary(m.optimized),
                             "measurement": m.setup(feed)}
    if m.latency_cpu_ns:
        extra.update(latency_cpu_ns=m.latency_cpu_ns, profiled_cpu_ns=m.profiled_cpu_ns)
    warnings = _cost_warnings(unknown_cost_ops(layers), len(channels.unresolved))
    if warnings:
        extra["warnings"] = warnings
    if request:
        extra["counters"] = _count(source, opts, feed, layers, request, progress)
    prof = Profile(metadata=_metadata(source, zoo_opts, opts, ort.__version__), layers=layers,
                   runs=run_list, latency_ns=m.latency_ns, extra=extra)
    if mem_request:
        mem_request.attach(prof, source, opts, feed)
        _released(None)
    return prof


def _original_shapes(source: ModelSource, feed: dict[str, Any], optimized: onnx.ModelProto | None) -> Any:
    """The original model's tensors at the fed shapes, only when a blocked layout needs them."""
    from layerperf.cost.graph import tensor_infos
    from layerperf.cost.layout import has_blocked
    from layerperf.tensor import TensorInfo

    if not has_blocked(optimized):
        return None
    given = {k: TensorInfo(k, tuple(v.shape), str(v.dtype)) for k, v in feed.items()}
    return tensor_infos(source.proto, given)


def _cost_warnings(unknown_ops: list[str], unresolved: int) -> list[str]:
    out = [f"FLOPs unknown for op types: {', '.join(unknown_ops)}"] if unknown_ops else []
    if unresolved:
        out.append(f"{unresolved} tensors in ONNX Runtime's NCHWc layout have no known real channel count: "
                   "their layers count the stored (possibly padded) channels")
    return out


def _released(value: _T) -> _T:
    """``value``, once the sessions that made it are gone and their memory is back with the system."""
    from layerperf.heap import release

    release()
    return value


def _count(source: ModelSource, opts: Any, feed: Any, layers: Any, request: Any,
           progress: Callable[[str, int, int], None] | None) -> dict[str, Any]:
    from layerperf.backends.ort.counting import apply_counts, count_layers

    if progress:
        progress("counting (stepwise)", 0, 1)
    worker_opts = {"opt_level": opts.opt_level, "provider": opts.provider, "threads": opts.threads}
    # body nodes of control flow run inside their parent: the stepwise executor gets (and refuses) the parent
    order = [layer.name for layer in layers if layer.parent is None]
    result = count_layers(source.path, worker_opts, feed, order, request, source.data_dir)
    if progress:
        progress("counting (stepwise)", 1, 1)
    return apply_counts(layers, result, request)
