"""The saved-profile contract: how a Profile maps to JSON under ``otherData`` of trace.json.

Versioned by ``FORMAT_VERSION``. Loading fills defaults for fields added later and rejects a
format newer than this layerperf understands with a clear error.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from layerperf.data import extension
from layerperf.data.layer import Layer
from layerperf.data.memory_report import MemoryReport
from layerperf.data.sections import CostNesting, CounterInfo, GraphSummary, Measurement
from layerperf.data.tensor import TensorInfo
from layerperf.errors import InputError

if TYPE_CHECKING:
    from layerperf.data.raw import RawProfile

FORMAT_VERSION = 1
FORMAT_KEY = "layerperf_format"
TRACE_FILENAME = "trace.json"  # what a profile directory holds the saved Profile in


def tensor_to_json(t: TensorInfo) -> dict[str, Any]:
    out = {"name": t.name, "shape": None if t.shape is None else list(t.shape), "dtype": t.dtype}
    if t.real_shape is not None:
        out["real_shape"] = list(t.real_shape)
    return out


def tensor_from_json(d: dict[str, Any]) -> TensorInfo:
    shape, real = d.get("shape"), d.get("real_shape")
    return TensorInfo(str(d.get("name", "")), None if shape is None else tuple(shape), str(d.get("dtype", "")),
                      None if real is None else tuple(real))


def layer_to_json(layer: Layer) -> dict[str, Any]:
    return {
        "name": layer.name, "op_type": layer.op_type, "domain": layer.domain, "provider": layer.provider,
        "inputs": [tensor_to_json(t) for t in layer.inputs],
        "outputs": [tensor_to_json(t) for t in layer.outputs],
        "param_bytes": layer.param_bytes, "flops": layer.flops, "bytes_read": layer.bytes_read,
        "bytes_written": layer.bytes_written, "counters": layer.counters, "memory": layer.memory_figures,
        "int_ops": layer.int_ops, "padded_flops": layer.padded_flops,
        **({"parent": layer.parent} if layer.parent is not None else {}),
        **extension.to_layer_json(layer.extension),
    }


def layer_from_json(d: dict[str, Any]) -> Layer:
    return Layer(
        name=str(d["name"]), op_type=str(d.get("op_type", "")), domain=str(d.get("domain", "")),
        provider=str(d.get("provider", "")),
        inputs=tuple(tensor_from_json(t) for t in d.get("inputs", ())),
        outputs=tuple(tensor_from_json(t) for t in d.get("outputs", ())),
        param_bytes=int(d.get("param_bytes", 0)), flops=d.get("flops"), bytes_read=d.get("bytes_read"),
        bytes_written=d.get("bytes_written"),
        counters={k: [float(x) for x in v] for k, v in d.get("counters", {}).items()},
        int_ops=d.get("int_ops"), padded_flops=d.get("padded_flops"),
        parent=None if d.get("parent") is None else str(d["parent"]),
        extension=extension.from_layer_json(d),
    )


def check_version(other: dict[str, Any], source: str) -> None:
    version = other.get(FORMAT_KEY)
    if not isinstance(version, int):
        raise InputError(f"{source} is not a layerperf trace (no otherData.{FORMAT_KEY})")
    if version > FORMAT_VERSION:
        raise InputError(f"{source} has layerperf format {version}; this layerperf reads up to "
                         f"{FORMAT_VERSION}", hint="upgrade layerperf")


# -- the optional sections (``extra`` in trace.json) ---------------------------------------------------
# Written only when present, as layerperf 0.1 wrote them; a key this version does not know is kept in
# ``Profile.sections`` and written back as it was.
_KNOWN = ("profiled_latency_ns", "latency_cpu_ns", "profiled_cpu_ns", "graph", "counters", "memory",
          "measurement", "warnings", "cost_nesting")


def sections_to_json(profile: RawProfile) -> dict[str, Any]:
    out: dict[str, Any] = {"profiled_latency_ns": list(profile.profiled_latency_ns)}
    if profile.graph is not None:
        out["graph"] = {"inputs": list(profile.graph.inputs), "outputs": list(profile.graph.outputs),
                        "initializers": dict(profile.graph.initializers)}
    if profile.measurement is not None:
        out["measurement"] = asdict(profile.measurement)
    if profile.latency_cpu_ns:
        out.update(latency_cpu_ns=list(profile.latency_cpu_ns), profiled_cpu_ns=list(profile.profiled_cpu_ns))
    if profile.warnings:
        out["warnings"] = list(profile.warnings)
    if profile.counters is not None:
        counters = asdict(profile.counters)
        for key in ("fraction_counted", "inclusive", "insitu_counts", "sample_period_ns", "sampled_runs",
                    "insitu_rank_ceiling", "insitu_rank_ceiling_without_views"):
            if counters[key] is None:
                del counters[key]
        out["counters"] = counters
    if profile.memory is not None:
        out["memory"] = profile.memory.to_json()
    if profile.cost_nesting is not CostNesting.INCLUSIVE:  # written when not the default, as older files read
        out["cost_nesting"] = profile.cost_nesting.value
    return {**out, **{k: v for k, v in profile.sections.items() if k not in out}}


def _ints(values: Any) -> list[int]:
    return [int(x) for x in values or ()]


def sections_from_json(extra: dict[str, Any]) -> dict[str, Any]:
    """The Profile keywords of a saved ``extra`` object; InputError (from the memory report) when damaged."""
    kw: dict[str, Any] = {
        "profiled_latency_ns": _ints(extra.get("profiled_latency_ns")),
        "latency_cpu_ns": _ints(extra.get("latency_cpu_ns")),
        "profiled_cpu_ns": _ints(extra.get("profiled_cpu_ns")),
        "warnings": [str(w) for w in extra.get("warnings") or ()],
        "sections": {k: v for k, v in extra.items() if k not in _KNOWN},
        "cost_nesting": CostNesting.SELF if extra.get("cost_nesting") == "self" else CostNesting.INCLUSIVE,
    }
    if (graph := extra.get("graph")) is not None:
        kw["graph"] = GraphSummary(tuple(graph.get("inputs", ())), tuple(graph.get("outputs", ())),
                                   {str(k): int(v) for k, v in (graph.get("initializers") or {}).items()})
    if (setup := extra.get("measurement")) is not None:
        kw["measurement"] = Measurement(**{k: v for k, v in setup.items() if k in Measurement.__dataclass_fields__})
    if (counters := extra.get("counters")) is not None:
        kw["counters"] = CounterInfo(**{k: v for k, v in counters.items() if k in CounterInfo.__dataclass_fields__})
    if (memory := extra.get("memory")) is not None:
        kw["memory"] = MemoryReport.from_json(memory)
    return kw
