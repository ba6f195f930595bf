"""BenchResult: what one ``bench`` measurement found, and its JSON and table-row forms."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from layerperf.backends.base import Kernel
from layerperf.bench.build import json_attrs
from layerperf.bench.counting import counter_metrics
from layerperf.bench.measure import Samples
from layerperf.bench.stats import SampleStats, deciles_us, describe
from layerperf.cost import Cost
from layerperf.data.figures import intensity, rate
from layerperf.data.tensor import TensorInfo


@dataclass(frozen=True, slots=True)
class BenchResult:
    """One operator measured in isolation: its timings, cost, counters and memory.

    Timings are per call, wall clock. Statistics are computed from the raw samples on demand
    (:attr:`stats`); ``overhead_us`` is the median time of an empty run (an Identity on one
    element) under the same settings, reported next to the op's time and never subtracted from it.
    """

    op_type: str
    domain: str
    node_name: str
    opset: int
    attrs: dict[str, Any]
    inputs: tuple[TensorInfo | None, ...]
    outputs: tuple[TensorInfo, ...]
    weights: tuple[str, ...]
    threads: int
    opt_level: str
    provider: str
    kernels: tuple[Kernel, ...]
    timing: Samples
    cost: Cost
    peak_rss_delta_bytes: int | None
    memory_source: str
    overhead_us: float | None = None
    counters: dict[str, float] = field(default_factory=dict)  # median count per call
    source: dict[str, Any] = field(default_factory=dict)  # for a node taken from a model
    warnings: tuple[str, ...] = ()
    backend: str = "onnxruntime"  # the runtime it ran on, by its name in the registry
    # measured beside a co-runner (bench --corun): its op, "shared" or "separate" cores, the CPU lists of the
    # run and of the co-runner, the co-runner's calls per second meanwhile; empty when measured alone
    corun: dict[str, Any] = field(default_factory=dict)

    # -- figures -------------------------------------------------------------------------------------
    @property
    def stats(self) -> SampleStats:
        return describe(self.timing.per_call_ns)

    @property
    def median_us(self) -> float:
        return self.stats.median_us

    @property
    def flops(self) -> int | None:
        return self.cost.flops

    @property
    def bytes(self) -> int | None:
        return self.cost.bytes

    @property
    def samples_us(self) -> list[float]:
        return [v / 1e3 for v in self.timing.per_call_ns]

    @property
    def yardstick_us(self) -> tuple[float, float, float] | None:
        """(p10, median, p90) in µs of the CPU-speed yardstick timed between the samples."""
        return deciles_us(self.timing.yardstick_ns)

    @property
    def in_shapes(self) -> str:
        return ";".join(t.shape_str() if t is not None else "-" for t in self.inputs)

    @property
    def out_shapes(self) -> str:
        return ";".join(t.shape_str() for t in self.outputs)

    @property
    def label(self) -> str:
        op = f"{self.domain}.{self.op_type}" if self.domain else self.op_type
        return f"{self.source['name']}:{self.node_name} ({op})" if self.source else op

    # -- forms -----------------------------------------------------------------------------------------
    def row(self) -> dict[str, Any]:
        """The flat figures: one table or CSV row (no lists)."""
        st = self.stats
        byt = self.cost.bytes
        time_s = st.median_us * 1e-6  # rates are over the median call
        return {
            "op_type": self.op_type, "domain": self.domain, "node": self.node_name,
            "in_shapes": self.in_shapes, "out_shapes": self.out_shapes, "threads": self.threads,
            "median_us": st.median_us, "min_us": st.min_us, "mean_us": st.mean_us, "p90_us": st.p90_us,
            "max_us": st.max_us, "stddev_us": st.stddev_us, "cv": st.cv, "outliers": st.outliers,
            "n_samples": st.n, "loops_per_sample": self.timing.loops, "disturbed": len(self.timing.disturbed_ns),
            "flops": self.cost.flops, "flops_per_s": rate(self.cost.flops, time_s),
            "bytes": byt, "bytes_read": self.cost.bytes_read, "bytes_written": self.cost.bytes_written,
            "bytes_per_s": rate(byt, time_s), "intensity": intensity(self.cost.flops, byt),
            "int_ops": self.cost.int_ops, "int_ops_per_s": rate(self.cost.int_ops, time_s),
            "peak_rss_delta_bytes": self.peak_rss_delta_bytes, "overhead_us": self.overhead_us,
            "yardstick_us": self.yardstick_us[1] if self.yardstick_us else None,
            "slowed": self.timing.slowed,
            **({"corun": self.corun["op"], "corun_cores": self.corun["cores"]} if self.corun else {}),
            **{f"{name}_per_call": value for name, value in self.counters.items()},
            **counter_metrics(self.counters),
        }

    def to_json(self) -> dict[str, Any]:
        """Everything, JSON-serializable: the row's figures plus samples, tensors and settings."""
        st = self.stats
        t = self.timing
        return {
            **self.row(),
            "samples": self.samples_us,
            "disturbed_samples": [v / 1e3 for v in t.disturbed_ns],
            "slowed_samples": [v / 1e3 for v in t.slowed_ns],
            "q1_us": st.q1_us, "q3_us": st.q3_us,
            "yardstick_p10_us": self.yardstick_us[0] if self.yardstick_us else None,
            "yardstick_p90_us": self.yardstick_us[2] if self.yardstick_us else None,
            "outliers_low": st.outliers_low, "outliers_high": st.outliers_high,
            "opset": self.opset, "attrs": json_attrs(self.attrs),
            "inputs": [_tensor(i) for i in self.inputs], "outputs": [_tensor(o) for o in self.outputs],
            "weights": list(self.weights), "backend": self.backend, "opt_level": self.opt_level,
            "provider": self.provider,
            "kernels": [{"name": k.name, "op_type": k.op_type, "provider": k.provider} for k in self.kernels],
            "warmup": {"batches": t.warmup_batches, "settled": t.warmup_settled, "seconds": t.warmup_s},
            "wait_checked": t.wait_checked, "used_disturbed": t.used_disturbed,
            "speed_reference_us": t.speed_reference_ns / 1e3 if t.speed_reference_ns else None,
            "slowed_used": t.slowed_used, "requested_samples": t.requested,
            "counters": dict(self.counters), "memory_source": self.memory_source,
            "source": dict(self.source), "warnings": list(self.warnings),
            **({"corun": dict(self.corun)} if self.corun else {}),
        }


def _tensor(t: TensorInfo | None) -> dict[str, Any] | None:
    if t is None:
        return None
    return {"name": t.name, "shape": list(t.shape) if t.shape is not None else None, "dtype": t.dtype}
