"""Flat, typed per-layer records: the rows a dataset of operator performance stores.

One :class:`LayerRecord` per layer, in execution order: the run it came from (backend, provider,
options, model, machine), the layer's features (op type, shapes, dtypes, work) and its measurements
(self-time statistics, counter medians). Every field is a scalar — int, float, str, or None where
unknown, never NaN — so a row maps onto a table of SQLite or DuckDB as it is; lists are text (shapes
``1x3x224x224;64x3x7x7``, options ``opt_level=all;provider=CPUExecutionProvider``). The names and types
are a contract: README "Per-layer records" lists them, and a field is only ever added.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from layerperf.data.extension import TvmKernel
from layerperf.data.figures import known, median
from layerperf.data.table import LayerStats, counter_labels, layer_stats

if TYPE_CHECKING:
    from layerperf.data.layer import Layer
    from layerperf.data.raw import RawProfile


@dataclass(frozen=True, slots=True)
class LayerRecord:
    """One layer of one profile, flat. Times in µs (self time: less the layers that ran inside it);
    work in FLOPs, integer operations and bytes per call; None where unknown."""

    # the run
    backend: str | None
    backend_version: str | None
    options: str  # the backend's own options, ``key=value;...``
    model_name: str
    model_sha256: str | None
    batch: int | None  # a built-in model's batch option, where given
    threads: int | None  # intra-op threads the run used (counted), else asked for; None: runtime default
    runs: int  # measured runs
    machine_cpu: str | None
    machine_cores: int | None
    layerperf_version: str | None
    created: str | None  # when the profile was made, ISO 8601 UTC
    # the layer
    layer_index: int  # its place in execution order
    name: str
    op_type: str
    domain: str
    provider: str  # what ran it: the layer's execution provider, device or target, else the run's
    parent: str | None  # the layer it ran inside (a control-flow node, a module), by name
    attributes: str | None  # the op's attributes as text; None until a backend records them
    in_shapes: str  # as stored and run: ``1x24x16x16;24x32x3x3``
    out_shapes: str
    in_dtypes: str  # ``float32;float32``
    out_dtypes: str
    real_in_shapes: str  # the model's own shapes where a layout padded them (NCHWc), else the same
    real_out_shapes: str
    flops: int | None
    int_ops: int | None
    bytes_read: int | None
    bytes_written: int | None
    param_bytes: int
    padded_flops: int | None  # FLOPs on the shapes as stored: padding included (NCHWc), else flops
    # the measurements
    calls: int
    median_us: float | None
    mean_us: float | None
    p90_us: float | None
    min_us: float | None
    max_us: float | None
    stddev_us: float | None  # sample standard deviation (None below 2 calls)
    total_us: float | None
    incl_median_us: float | None  # whole duration, the layers inside it included
    share: float | None  # of all measured layer time
    counters: str  # median count per pass of each perf counter, ``label=value;...``
    stepwise_median_us: float | None  # time in the counting runs (perf counters), to compare with median_us
    # a compiled runtime's (TVM's): the kernel's schedule in one line (``default schedule`` untuned), the
    # build's tuning state and the target it was compiled for; None on runtimes that compile nothing
    schedule: str | None = None
    tuning_state: str | None = None
    target: str | None = None


def layer_records(profile: RawProfile) -> list[LayerRecord]:
    """The profile's layers as :class:`LayerRecord` rows, in execution order."""
    run = _run_fields(profile)
    stats = layer_stats(profile)
    counters = _counters(profile)
    stepwise = profile.counters.stepwise_median_ns if profile.counters is not None else []
    return [
        LayerRecord(**run, **_layer_fields(i, layer, profile.metadata.provider),
                    **_measured(st, profile.durations_ns(i)), counters=counters[i],
                    stepwise_median_us=known(stepwise[i] / 1e3) if i < len(stepwise) else None)
        for i, (layer, st) in enumerate(zip(profile.layers, stats, strict=True))
    ]


def _run_fields(profile: RawProfile) -> dict[str, Any]:
    meta = profile.metadata
    measured = profile.measurement.intra_op_threads if profile.measurement is not None else None
    zoo = meta.model.zoo_options or {}
    return {
        "backend": meta.backend, "backend_version": meta.backend_version, "options": meta.options.text(),
        "model_name": meta.model.name, "model_sha256": meta.model.sha256, "batch": zoo.get("batch"),
        "threads": measured or meta.threads, "runs": len(profile.runs),
        "machine_cpu": meta.machine.cpu if meta.machine else None,
        "machine_cores": meta.machine.cores if meta.machine else None,
        "layerperf_version": meta.layerperf_version, "created": meta.created,
        "tuning_state": _text_or_none(meta.options.get("tuning_state")),
        "target": _text_or_none(meta.options.get("target")),
    }


def _text_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def _layer_fields(index: int, layer: Layer, run_provider: str | None) -> dict[str, Any]:
    return {
        "layer_index": index, "name": layer.name, "op_type": layer.op_type, "domain": layer.domain,
        "provider": layer.provider or run_provider or "", "parent": layer.parent, "attributes": None,
        "in_shapes": layer.in_shapes, "out_shapes": layer.out_shapes, "in_dtypes": layer.in_dtypes,
        "out_dtypes": layer.out_dtypes, "real_in_shapes": layer.real_in_shapes,
        "real_out_shapes": layer.real_out_shapes, "flops": layer.flops, "int_ops": layer.int_ops,
        "bytes_read": layer.bytes_read, "bytes_written": layer.bytes_written, "param_bytes": layer.param_bytes,
        "padded_flops": layer.flops_as_stored,
        "schedule": _schedule(layer),
    }


def _schedule(layer: Layer) -> str | None:
    ext = layer.extension
    return ext.schedule.compact() if isinstance(ext, TvmKernel) and ext.schedule is not None else None


def _measured(st: LayerStats, durations_ns: np.ndarray) -> dict[str, Any]:
    return {
        "calls": st.calls, "median_us": known(st.median_us), "mean_us": known(st.mean_us),
        "p90_us": known(st.p90_us), "min_us": known(st.min_us), "max_us": known(st.max_us),
        "stddev_us": float(np.std(durations_ns, ddof=1)) / 1e3 if durations_ns.size > 1 else None,
        "total_us": known(st.total_us), "incl_median_us": known(st.incl_median_us), "share": known(st.share),
    }


def _counters(profile: RawProfile) -> list[str]:
    """Per layer, each counter's median over its passes as ``label=value;...`` (the labels it has)."""
    labels = counter_labels(profile)
    out = []
    for layer in profile.layers:
        cells = [(label, known(median(values))) for label in labels if (values := layer.counters.get(label))]
        out.append(";".join(f"{label}={value!r}" for label, value in cells if value is not None))
    return out
