"""The per-kernel view of a GPU trace: device activities grouped by kernel name.

A trace reader that sees device activity (PyTorch's Kineto traces) keeps every activity here — its
name, kind (kernel, memcpy, memset), device, duration and the op that launched it — next to the op
table. ``layerperf analyze TRACE --aggregate-by kernel`` groups them by name: how often each kernel
ran, its total and mean time, its share of all device time, which ops launched it, and its share of
those ops' device time (so a layout conversion's weight inside convolutions shows).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import numpy as np

from layerperf.analysis.gpu.accumulate import Stats
from layerperf.analysis.gpu.source import Activities, activities
from layerperf.data.calls import Calls, KernelTable, Labels
from layerperf.data.fold import Folded
from layerperf.errors import InputError

KERNEL_COLUMNS = ("name", "kind", "device", "calls", "total_us", "mean_us", "share", "launched_by", "launcher_share",
                  "median_us", "min_us", "max_us", "stddev_us")
ORDERS = {"time": "total_us", "total": "total_us", "total_us": "total_us", "calls": "calls", "count": "calls",
          "mean": "mean_us", "mean_us": "mean_us", "share": "total_us", "name": "name", "median": "median_us",
          "median_us": "median_us", "min": "min_us", "min_us": "min_us", "max": "max_us", "max_us": "max_us",
          "stddev": "stddev_us", "stddev_us": "stddev_us"}
# --aggregate: the per-kernel figure a row is ranked by (every figure is always shown)
BY_AGGREGATE = {"sum": "total_us", "mean": "mean_us", "median": "median_us", "max": "max_us", "min": "min_us",
                "count": "calls"}


def of(table: Calls | Folded) -> KernelTable | None:
    """The kernel table a reader kept with ``table`` (whole or folded), if any."""
    kernels = table.meta.get("kernels")
    return kernels if isinstance(kernels, KernelTable) else None


def _launched_by(counts: Counter[str]) -> str:
    return ", ".join(f"{op or '(no op)'} ({n})" for op, n in counts.most_common())


def _seen(keys: np.ndarray, offset: int, first: dict[int, int], counts: Counter[int] | None = None) -> None:
    """Note each key's first row (trace order) and, given ``counts``, how many rows have it."""
    uniq, at, n = np.unique(keys, return_index=True, return_counts=True)
    for key, i, c in zip(uniq.tolist(), at.tolist(), n.tolist(), strict=True):
        first.setdefault(key, offset + i)
        if counts is not None:
            counts[key] += c


class _Kernels:
    """The per-name fold over the activities in the trace's order. Memory: per kernel name its
    duration :class:`~layerperf.analysis.gpu.accumulate.Stats` group (median sketch included) and first
    row; per (name, kind), (name, device) and (name, launcher) pair present its first row (and count);
    per launcher its device time."""

    def __init__(self, src: Activities) -> None:
        self.durations = Stats(medians=True)
        self.first: dict[int, int] = {}
        self.kinds: dict[int, int] = {}
        self.devices: dict[int, int] = {}
        self.ops: dict[int, int] = {}
        self.op_calls: Counter[int] = Counter()
        self.by_launcher: np.ndarray = np.zeros(0)
        self.all_ns = 0.0
        self.tables: KernelTable | None = None  # a block: its string tables name every block's codes
        offset = 0
        for block in src.blocks():
            self._add(block, offset)
            self.tables = block
            offset += len(block)

    def _add(self, block: KernelTable, offset: int) -> None:
        name = block.name.codes.astype(np.int64)
        dur = block.dur_ns
        self.durations.add(name, dur)
        _seen(name, offset, self.first)
        _seen(name * len(block.kind.values) + block.kind.codes, offset, self.kinds)
        _seen(name * len(block.device.values) + block.device.codes, offset, self.devices)
        _seen(name * len(block.launcher.values) + block.launcher.codes, offset, self.ops, self.op_calls)
        launched = np.bincount(block.launcher.codes, weights=dur, minlength=len(block.launcher.values))
        self.by_launcher = launched if not self.by_launcher.size else self.by_launcher + launched
        self.all_ns += float(dur.sum())

    def pairs(self, seen: dict[int, int], labels: Labels) -> dict[int, list[int]]:
        """Per name code, the codes of ``labels`` seen with it, in order of first row."""
        out: dict[int, list[int]] = {}
        width = len(labels.values)
        for key in sorted(seen, key=seen.__getitem__):
            out.setdefault(key // width, []).append(key % width)
        return out

    def row(self, code: int, kinds: list[int], devices: list[int], ops: list[int]) -> dict[str, Any]:
        t, stats = self.tables, self.durations
        assert t is not None
        width = len(t.launcher.values)
        counts = Counter({t.launcher.values[op]: self.op_calls[code * width + op] for op in ops})
        total, n = float(stats.total[code]), int(stats.count[code])
        launcher_ns = sum(float(self.by_launcher[op]) for op in ops)
        return {
            "name": t.name.values[code], "kind": "/".join(sorted(t.kind.values[k] for k in kinds)),
            "device": "/".join(sorted(t.device.values[d] for d in devices)), "calls": n, "total_us": total / 1e3,
            "mean_us": total / n / 1e3, "share": total / self.all_ns if self.all_ns > 0 else None,
            "launched_by": _launched_by(counts), "launcher_share": total / launcher_ns if launcher_ns > 0 else None,
            **_spread(stats, code),
        }


def aggregate(kernels: KernelTable | Activities, *, name: str | re.Pattern[str] | None = None) -> list[dict[str, Any]]:
    """One row per kernel name (kernels whose name matches ``name``, searched), largest total first."""
    fold = _Kernels(activities(kernels))
    t = fold.tables
    if t is None or not fold.first:
        return []
    kinds, devices = fold.pairs(fold.kinds, t.kind), fold.pairs(fold.devices, t.device)
    ops = fold.pairs(fold.ops, t.launcher)
    pattern = re.compile(name) if isinstance(name, str) else name
    rows = [fold.row(code, kinds[code], devices[code], ops[code])
            for code in sorted(fold.first, key=fold.first.__getitem__)
            if pattern is None or pattern.search(t.name.values[code])]
    return sorted(rows, key=lambda r: -r["total_us"])


def _spread(stats: Stats, code: int) -> dict[str, float]:
    """One kernel name's median, least, largest and standard deviation (population, as numpy's default)
    of its activities' durations, µs."""
    return {"median_us": stats.median(code) / 1e3, "min_us": float(stats.least[code]) / 1e3,
            "max_us": float(stats.most[code]) / 1e3, "stddev_us": stats.std(code) / 1e3}


def order(rows: list[dict[str, Any]], by: str | None, how: str = "sum") -> list[dict[str, Any]]:
    """Rows by ``by`` (by default the figure ``how`` — sum, mean, median, max, min, count — names: total
    time unless told); calls, mean, median, min, max, stddev, name; largest first, ``+COLUMN`` ascending."""
    if by is None:
        figure = BY_AGGREGATE[how]
        return sorted(rows, key=lambda r: -r[figure])
    ascending = by.startswith("+")
    column = ORDERS.get(by.lstrip("+-"))
    if column is None:
        raise InputError(f"unknown --order-by column {by!r} for --aggregate-by kernel",
                         hint=f"valid: {', '.join(ORDERS)} (prefix + for ascending)")
    if column == "name":
        return sorted(rows, key=lambda r: str(r["name"]), reverse=by.startswith("-"))
    return sorted(rows, key=lambda r: r[column] if ascending else -r[column])
