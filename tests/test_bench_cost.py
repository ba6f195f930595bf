"""bench: FLOPs and bytes of the measured op are exact (one multiply-add = 2 FLOPs).

Expected figures are worked out here from the shapes, independently of the cost model, following
its documented conventions (bias adds 1 FLOP per output element; Gemm's C adds M*N; pooling costs
prod(kernel) per output element; global pooling 1 per input element).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import layerperf
from layerperf.bench import BenchResult

FAST: dict[str, Any] = {"samples": 3, "min_time_ms": 0.05, "warmup_max_s": 0.05, "overhead": False, "speed_wait_s": 0}
F32 = 4


def bench(op: str, inputs: dict[str, Any], attrs: dict[str, Any] | None = None) -> BenchResult:
    return layerperf.bench_op(op, inputs, attrs, **FAST)


def nbytes(*shapes: tuple[int, ...]) -> int:
    return sum(math.prod(s) for s in shapes) * F32


def conv_flops(n: int, cout: int, out_hw: tuple[int, int], cin: int, group: int, k: tuple[int, int],
               bias: bool) -> int:
    outputs = n * cout * out_hw[0] * out_hw[1]
    return 2 * outputs * (cin // group) * k[0] * k[1] + (outputs if bias else 0)


@pytest.mark.parametrize("x, w, attrs, out, group", [
    ((1, 3, 16, 16), (8, 3, 3, 3), {"pads": [1, 1, 1, 1]}, (1, 8, 16, 16), 1),
    ((1, 3, 16, 16), (8, 3, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}, (1, 8, 8, 8), 1),
    ((2, 3, 15, 17), (4, 3, 5, 3), {"strides": [2, 3]}, (2, 4, 6, 5), 1),
    ((1, 8, 10, 10), (16, 4, 3, 3), {"group": 2}, (1, 16, 8, 8), 2),
    ((1, 8, 10, 10), (8, 1, 3, 3), {"group": 8, "pads": [1, 1, 1, 1]}, (1, 8, 10, 10), 8),
])
@pytest.mark.parametrize("bias", [False, True])
def test_conv(x: tuple, w: tuple, attrs: dict, out: tuple, group: int, bias: bool) -> None:
    inputs = {"X": x, "W": w, **({"B": (w[0],)} if bias else {})}
    r = bench("Conv", inputs, attrs)
    assert r.outputs[0].shape == out
    assert r.flops == conv_flops(x[0], w[0], out[2:], x[1], group, w[2:], bias)
    read = nbytes(x, w, *([(w[0],)] if bias else []))
    assert (r.cost.bytes_read, r.cost.bytes_written) == (read, nbytes(out))
    assert r.bytes == read + nbytes(out)
    assert r.to_json()["flops"] == r.flops and r.to_json()["bytes"] == r.bytes


@pytest.mark.parametrize("a, b, out", [
    ((4, 8), (8, 16), (4, 16)),
    ((2, 4, 8), (8, 16), (2, 4, 16)),
    ((3, 1, 4, 8), (2, 8, 5), (3, 2, 4, 5)),
])
def test_matmul(a: tuple, b: tuple, out: tuple) -> None:
    r = bench("MatMul", {"A": a, "B": b})
    assert r.outputs[0].shape == out
    assert r.flops == 2 * math.prod(out) * a[-1]
    assert (r.cost.bytes_read, r.cost.bytes_written) == (nbytes(a, b), nbytes(out))


@pytest.mark.parametrize("attrs, extra", [
    ({"transB": 1}, 0),
    ({"transB": 1, "alpha": 0.5}, 4 * 16),  # alpha != 1 scales every output: M*N more
])
def test_gemm(attrs: dict, extra: int) -> None:
    r = bench("Gemm", {"A": (4, 8), "B": (16, 8), "C": (16,)}, attrs)
    assert r.outputs[0].shape == (4, 16)
    assert r.flops == 2 * 4 * 16 * 8 + 4 * 16 + extra
    assert (r.cost.bytes_read, r.cost.bytes_written) == (nbytes((4, 8), (16, 8), (16,)), nbytes((4, 16)))


@pytest.mark.parametrize("op, attrs, out, window", [
    ("MaxPool", {"kernel_shape": [2, 2], "strides": [2, 2]}, (1, 2, 4, 4), 4),
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, (1, 2, 4, 4), 9),
    ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, (1, 2, 8, 8), 9),
    ("AveragePool", {"kernel_shape": [2, 2], "strides": [3, 3], "ceil_mode": 1}, (1, 2, 3, 3), 4),
])
def test_pooling(op: str, attrs: dict, out: tuple, window: int) -> None:
    r = bench(op, {"X": (1, 2, 8, 8)}, attrs)
    assert r.outputs[0].shape == out
    assert r.flops == math.prod(out) * window
    assert (r.cost.bytes_read, r.cost.bytes_written) == (nbytes((1, 2, 8, 8)), nbytes(out))


def test_global_pooling() -> None:
    r = bench("GlobalAveragePool", {"X": (1, 2, 8, 8)})
    assert r.outputs[0].shape == (1, 2, 1, 1)
    assert r.flops == 2 * 8 * 8
    assert r.bytes == nbytes((1, 2, 8, 8), (1, 2, 1, 1))


def test_rates_follow_from_the_median() -> None:
    r = bench("MatMul", {"A": (16, 16), "B": (16, 16)})
    row = r.row()
    assert row["flops_per_s"] == pytest.approx(r.flops / (row["median_us"] * 1e-6))
    assert row["bytes_per_s"] == pytest.approx(r.bytes / (row["median_us"] * 1e-6))
    assert row["intensity"] == pytest.approx(r.flops / r.bytes)


def test_unknown_flops_are_none_not_zero() -> None:
    r = layerperf.bench_op("Multinomial", {"input": (2, 4)}, {"sample_size": 3}, opset=21, **FAST)
    assert r.flops is None and r.row()["flops_per_s"] is None
    assert any("FLOPs unknown" in w for w in r.warnings)
    assert r.bytes == nbytes((2, 4)) + 2 * 3 * 4  # int32 samples out
    assert np.isfinite(r.median_us)
