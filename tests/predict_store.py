"""A synthetic store for the predictor's tests: models of Conv, Relu and Gemm layers whose times follow
known rates, written through the collector's own Store (one transaction per configuration)."""

from __future__ import annotations

from pathlib import Path

from layerperf.data.records import LayerRecord
from layerperf.dataset.config import Config
from layerperf.dataset.fingerprint import Fingerprint
from layerperf.dataset.measure import ConfigResult
from layerperf.dataset.store import Store

# FLOP/s (Conv, Gemm) and bytes/s (Relu) at one thread; two threads run x1.8
RATES = {"Conv": 2e10, "Gemm": 3e10, "Relu": 4e9}
BETWEEN_US = 3.0  # per layer
SCALE = 1.05  # the run over its layers


def layer_us(op_type: str, flops: int, moved: int, threads: int) -> float:
    work = moved if op_type == "Relu" else flops
    return work / RATES[op_type] * 1e6 / (1.8 if threads == 2 else 1.0) + 2.0


def _record(model: str, i: int, op_type: str, c: int, hw: int, batch: int, threads: int) -> LayerRecord:
    x = f"{batch}x{c}x{hw}x{hw}"
    if op_type == "Conv":
        ins, out, flops = f"{x};{c}x{c}x3x3;{c}", x, 2 * batch * c * c * 9 * hw * hw
    elif op_type == "Gemm":
        ins, out, flops = f"{batch}x{c * 4};{c}x{c * 4};{c}", f"{batch}x{c}", 2 * batch * c * c * 4
    else:
        ins, out, flops = x, x, batch * c * hw * hw
    moved = 8 * batch * c * hw * hw
    us = layer_us(op_type, flops, moved, threads)
    return LayerRecord(
        backend="onnxruntime", backend_version="1", options="", model_name=model, model_sha256=None, batch=batch,
        threads=threads, runs=5, machine_cpu=None, machine_cores=None, layerperf_version=None, created=None,
        layer_index=i, name=f"{op_type.lower()}{i}", op_type=op_type, domain="", provider="CPUExecutionProvider",
        parent=None, attributes=None, in_shapes=ins, out_shapes=out, in_dtypes="float32", out_dtypes="float32",
        real_in_shapes=ins, real_out_shapes=out, flops=flops, int_ops=None, bytes_read=moved // 2,
        bytes_written=moved // 2, param_bytes=0, padded_flops=flops, calls=5, median_us=us, mean_us=us, p90_us=us,
        min_us=us, max_us=us, stddev_us=0.0, total_us=5 * us, incl_median_us=us, share=None, counters="",
        stepwise_median_us=None)


def model_layers(model: str, widths: list[int], batch: int, threads: int) -> list[LayerRecord]:
    """A model of blocks Conv, Relu per width (the image halving), then a Gemm."""
    out: list[LayerRecord] = []
    hw = 32
    for c in widths:
        for op_type in ("Conv", "Relu"):
            out.append(_record(model, len(out), op_type, c, hw, batch, threads))
        hw = max(hw // 2, 4)
    out.append(_record(model, len(out), "Gemm", widths[-1], hw, batch, threads))
    return out


MODELS = {"synth-a": [8, 16, 32], "synth-b": [16, 32, 64, 64], "synth-c": [8, 8, 16, 32, 64],
          "synth-d": [12, 24, 48], "synth-e": [16, 16, 32, 32, 64, 64]}


def write_store(path: Path, models: dict[str, list[int]] = MODELS) -> Path:
    """The store at ``path``: every model at batch 1 and 4, threads 1 and 2."""
    fp = Fingerprint.here()
    with Store.open(path, create=True) as store:
        for model, widths in models.items():
            for batch in (1, 4):
                for threads in (1, 2):
                    records = tuple(model_layers(model, widths, batch, threads))
                    total = sum(r.median_us or 0.0 for r in records)
                    latency = SCALE * total + BETWEEN_US * len(records)
                    cfg = Config(model=model, backend="onnxruntime", batch=batch, threads=threads, opt_level="all",
                                 runs=5, warmup=1)
                    store.write(ConfigResult(cfg, fp, "ok", None, "2026-01-01T00:00:00Z", 1.0, records=records,
                                             runs_measured=5, runs_used=5, runs_slowed=0, slowed_used=False,
                                             attempts=1, latency_median_us=latency, latency_p90_us=latency))
    return path
