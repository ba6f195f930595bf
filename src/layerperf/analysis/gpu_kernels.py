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

from layerperf.data import figures
from layerperf.data.calls import Calls, KernelTable
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


def aggregate(kernels: KernelTable, *, name: str | re.Pattern[str] | None = None) -> list[dict[str, Any]]:
    """One row per kernel name (kernels whose name matches ``name``, searched), largest total first."""
    names, kinds, devices = kernels.name.tolist(), kernels.kind.tolist(), kernels.device.tolist()
    launchers = kernels.launcher.tolist()
    durations = kernels.dur_ns.tolist()
    all_ns = float(np.sum(kernels.dur_ns))
    by_launcher: dict[str, float] = {}
    for op, dur in zip(launchers, durations, strict=True):
        by_launcher[op] = by_launcher.get(op, 0.0) + dur
    groups: dict[str, dict[str, Any]] = {}
    for kernel, kind, device, op, dur in zip(names, kinds, devices, launchers, durations, strict=True):
        g = groups.setdefault(kernel, {"kinds": set(), "devices": set(), "ops": Counter(), "total": 0.0, "n": 0})
        g["kinds"].add(kind)
        g["devices"].add(device)
        g["ops"][op] += 1
        g["total"] += dur
        g["n"] += 1
    pattern = re.compile(name) if isinstance(name, str) else name
    spread = _spread(kernels)
    rows = []
    for kernel, g in groups.items():
        if pattern is not None and not pattern.search(kernel):
            continue
        launcher_ns = sum(by_launcher[op] for op in g["ops"])
        rows.append({
            "name": kernel, "kind": "/".join(sorted(g["kinds"])), "device": "/".join(sorted(g["devices"])),
            "calls": g["n"], "total_us": g["total"] / 1e3, "mean_us": g["total"] / g["n"] / 1e3,
            "share": g["total"] / all_ns if all_ns > 0 else None, "launched_by": _launched_by(g["ops"]),
            "launcher_share": g["total"] / launcher_ns if launcher_ns > 0 else None,
            **spread[kernel],
        })
    return sorted(rows, key=lambda r: -r["total_us"])


def _spread(kernels: KernelTable) -> dict[str, dict[str, float]]:
    """Per kernel name: the median, least, largest and standard deviation (population, as numpy's
    default) of its activities' durations, µs."""
    g = figures.groups(kernels.name.codes)
    dur = kernels.dur_ns
    stats = {key: figures.grouped(dur, g, stat) / 1e3
             for key, stat in (("median_us", "median"), ("min_us", "min"), ("max_us", "max"))}
    mean = figures.grouped(dur, g, "mean")
    with np.errstate(invalid="ignore"):
        var = figures.grouped((dur - mean[g.inverse]) ** 2, g, "mean") if dur.size else mean
    stats["stddev_us"] = np.sqrt(var) / 1e3
    out: dict[str, dict[str, float]] = {}
    for code, kernel in enumerate(kernels.name.values):
        if code < g.count and g.sizes[code]:
            out[kernel] = {key: float(v[code]) for key, v in stats.items()}
    return out


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
