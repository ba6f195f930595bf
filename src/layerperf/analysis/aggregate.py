"""Pure functions on the event table (Calls): filter, aggregate, order, top, and the rows a writer prints; diff.

Everything is numpy over whole columns — grouping is ``np.unique`` over integer codes and
``np.bincount``/``reduceat`` — so a million calls aggregate in a fraction of a second.
Unknown figures stay NaN through every step and come out as None, never 0.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from layerperf.analysis import matching
from layerperf.analysis.matching import Node, op_family
from layerperf.data import figures
from layerperf.data.calls import GROUPINGS, STRING_COLUMNS, Calls, Labels, group_codes
from layerperf.data.fold import Folded
from layerperf.errors import InputError

GROUP_KEYS = GROUPINGS
AGGREGATES = ("sum", "mean", "median", "max", "min", "count")

# A row's self time, its calls' combined by the aggregate (sum by default): ``self_us`` inside the code;
# analyze's rows, JSON and CSV publish it as ``time_us`` (the layer table's self time is figures'
# ``median_us``, one layer's per-call median: both are shown under "self time").
SELF_US = "self_us"
PUBLISHED = {SELF_US: "time_us"}
# Orderable columns: canonical name and what else a user may call it (the published names included).
ALIASES = {
    "time": SELF_US, "time_us": SELF_US, "self": SELF_US, "self_time": SELF_US, "total": "total_us",
    "cumulative": "cum_share", "inclusive": "incl_us", "device": "device_us", "device_self": "device_us",
    "device_incl": "device_incl_us", "device_inclusive": "device_incl_us", "count": "calls",
    "computation": "flops", "FLOPS": "flops_per_s", "flops/s": "flops_per_s", "memory": "bytes",
    "bandwidth": "bytes_per_s", "type": "op_type", "int ops": "int_ops", "OP/s": "int_ops_per_s",
    "ops/s": "int_ops_per_s",
}
NUMERIC_COLUMNS = (SELF_US, "total_us", "share", "cum_share", "incl_us", "device_us", "device_incl_us", "calls",
                   "flops", "flops_per_s", "bytes", "bytes_per_s", "int_ops", "int_ops_per_s")
# counts of work: whole numbers, written as integers (2313110528, not 2.31311e+09 or 2313110528.0); a mean
# over calls that is not whole stays a float
COUNT_COLUMNS = ("flops", "bytes", "int_ops")


# -- filter ----------------------------------------------------------------------------------------
def filter_table(table: Calls, *, types: Sequence[str] = (), name: str | re.Pattern[str] | None = None,
                 min_time_s: float | None = None) -> Calls:
    """Rows of the given op types, whose name matches ``name`` (a regex, searched), and whose
    (aggregated) self time is at least ``min_time_s`` seconds."""
    keep = np.ones(len(table), dtype=bool)
    if types:
        keep &= table.op_type.mask(types)
    if name is not None:
        pattern = compile_regex(name) if isinstance(name, str) else name
        keep &= _label_mask(table.name, lambda v: pattern.search(v) is not None)
    if min_time_s is not None:
        keep &= table.dur_ns >= min_time_s * 1e9
    return table if keep.all() else table.take(np.flatnonzero(keep))


def compile_regex(text: str) -> re.Pattern[str]:
    try:
        return re.compile(text)
    except re.error as exc:
        raise InputError(f"--name: invalid regular expression {text!r} ({exc})") from None


def _label_mask(labels: Labels, test: Any) -> np.ndarray:
    hit = np.fromiter((bool(test(v)) for v in labels.values), dtype=bool, count=len(labels.values))
    return hit[labels.codes] if labels.values else np.zeros(len(labels), dtype=bool)


# -- aggregate -------------------------------------------------------------------------------------
# --aggregate's words for the statistic (layerperf.data.figures.STATS) combining a group's calls; ``count``
# sums like ``sum``, and is meant for ordering by calls
_STAT = {"sum": "total", "count": "total", "mean": "mean", "median": "median", "max": "max", "min": "min"}


def _groups(table: Calls, by: str) -> figures.Groups:
    return figures.groups(group_codes(table, by))


def _reduce(values: np.ndarray, g: figures.Groups, how: str) -> np.ndarray:
    """One value per group; NaN where any value of the group is NaN (unknown stays unknown)."""
    return figures.grouped(values, g, _STAT[how])


def _group_labels(labels: Labels, g: figures.Groups, mixed: Any) -> Labels:
    """Each group's value when all its rows agree; ``mixed(n)`` for a group of n different values."""
    n_values = max(len(labels.values), 1)
    pairs = np.unique(g.inverse.astype(np.int64) * n_values + labels.codes)
    distinct = np.bincount(pairs // n_values, minlength=g.count)
    first = labels.codes[g.rows[g.starts]] if g.count else np.zeros(0, dtype=np.int32)
    values = list(labels.values)
    codes = first.astype(np.int32).copy()
    extra: dict[int, int] = {}
    for group in np.flatnonzero(distinct > 1).tolist():
        n = int(distinct[group])
        if n not in extra:
            extra[n] = len(values)
            values.append(mixed(n))
        codes[group] = extra[n]
    return Labels(codes, tuple(values))


def aggregate(table: Calls, by: str = "name", how: str = "sum") -> Calls:
    """One row per group of ``by`` (name, type, provider or shape), figures combined with ``how``.

    ``how`` applies to self time, inclusive and device time, FLOPs, bytes, integer operations and
    counters (``count`` sums them and is meant for ordering by calls); ``total_ns`` is always the sum and ``calls`` the
    number of calls. A sum of inclusive figures (time, device time) counts a call nested in another
    call of its group once, so it never exceeds the time the group was busy. String columns keep the
    group's value, or say how many different ones it has.
    """
    check_grouping(by, how)
    g = _groups(table, by)
    labels = {
        column: _group_labels(table.labels(column), g,
                              (lambda n: f"({n} names)") if column == "name" else (lambda n: "*"))
        for column in STRING_COLUMNS
    }
    return Calls(
        name=labels["name"], op_type=labels["op_type"], provider=labels["provider"],
        in_shapes=labels["in_shapes"], out_shapes=labels["out_shapes"],
        dur_ns=_reduce(table.dur_ns, g, how), total_ns=_reduce(table.total_ns, g, "sum"),
        incl_ns=_reduce(_once(table, by, table.incl_ns, how), g, how), device_ns=_reduce(table.device_ns, g, how),
        device_incl_ns=_reduce(_once(table, by, table.device_incl, how), g, how),
        calls=figures.grouped(table.calls, g, "total").astype(np.int64),
        flops=_reduce(_once(table, by, table.flops, how) if table.meta.get("inclusive_flops") else table.flops,
                      g, how),
        bytes=_reduce(table.bytes, g, how), int_ops=_reduce(table.int_ops, g, how),
        counters={k: _reduce(v, g, how) for k, v in table.counters.items()},
        meta={**table.meta, "aggregate_by": by, "aggregate": how})


def _once(table: Calls, by: str, values: np.ndarray, how: str) -> np.ndarray:
    """Inclusive ``values`` (times; a control-flow node's FLOPs, its body's) with calls nested in a call
    of their own group zeroed, when they are summed."""
    outer = table.outer.get(by)
    if outer is None or how not in ("sum", "count"):
        return values
    return np.where(outer, values, 0.0)


# -- columns, order, top ---------------------------------------------------------------------------
def grand_total_ns(table: Calls | Folded) -> float:
    """Self time of the whole trace (as read, before filters), the base of every share."""
    total = table.meta.get("total_ns")
    if total or isinstance(table, Folded):
        return float(total or 0.0)
    return float(np.nansum(table.total_ns))


def on_device(table: Calls) -> np.ndarray:
    """Rows whose work ran on a device: some device time was launched under them."""
    with np.errstate(invalid="ignore"):
        return np.asarray(table.device_incl > 0)


def rate_time_ns(table: Calls) -> np.ndarray:
    """The time FLOP/s and bandwidth are over: the device time of the kernels launched under an op
    (inclusive: a convolution's work is in its children's kernels) where there is some, else its
    self time (the CPU doing the work itself) — or its whole duration where a nested row's FLOPs
    count what ran inside it (``meta["inclusive_flops"]``: a control-flow node's are its body's)."""
    host = table.incl_ns if table.meta.get("inclusive_flops") else table.dur_ns
    return np.where(on_device(table), table.device_incl, host)


def numeric_columns(table: Calls) -> dict[str, np.ndarray]:
    """Every numeric column by its name (:data:`PUBLISHED` says where JSON names it otherwise), derived
    ones included (cum_share in table order)."""
    grand = grand_total_ns(table)
    rate_s = rate_time_ns(table) * 1e-9
    cols = {
        SELF_US: table.dur_ns / 1e3, "total_us": table.total_ns / 1e3,
        "share": figures.shares(table.total_ns, grand), "cum_share": figures.cumulative_shares(table.total_ns, grand),
        "incl_us": table.incl_ns / 1e3, "device_us": table.device_ns / 1e3, "device_incl_us": table.device_incl / 1e3,
        "calls": table.calls.astype(np.float64), "flops": table.flops,
        "flops_per_s": figures.rates(table.flops, rate_s), "bytes": table.bytes,
        "bytes_per_s": figures.rates(table.bytes, rate_s),
        "int_ops": table.int_ops, "int_ops_per_s": figures.rates(table.int_ops, rate_s),
    }
    cols.update(table.counters)
    return cols


def _counter_names(table: Calls | Folded) -> list[str]:
    return list(table.counter_labels if isinstance(table, Folded) else table.counters)


def orderable(table: Calls | Folded) -> list[str]:
    """Column names ``order`` accepts for this table, as analyze publishes them."""
    return [*(PUBLISHED.get(c, c) for c in NUMERIC_COLUMNS), *_counter_names(table), *STRING_COLUMNS]


def _direction(column: str) -> tuple[str, bool | None]:
    """An --order-by value's column and direction: ``+COLUMN`` ascending, ``-COLUMN`` descending, else None
    (the column's default)."""
    if column[:1] in "+-" and len(column) > 1:
        return column[1:], column[0] == "+"
    return column, None


def resolve_column(table: Calls | Folded, column: str) -> tuple[str, bool | None]:
    """(canonical column, ascending or None for the column's default) of an --order-by value."""
    column, ascending = _direction(column)
    if column in _counter_names(table) or column in NUMERIC_COLUMNS or column in STRING_COLUMNS:
        return column, ascending
    canonical = ALIASES.get(column) or ALIASES.get(column.lower())
    if canonical is None:
        short = ", ".join(a for a in ALIASES if a.isidentifier() and a.islower() and a not in orderable(table))
        raise InputError(f"unknown --order-by column {column!r}",
                         hint=f"valid: {', '.join(orderable(table))}, or {short} (prefix + for ascending)")
    return canonical, ascending


def order(table: Calls, by: str = SELF_US, ascending: bool | None = None) -> Calls:
    """Rows sorted by a column (any of :func:`orderable`, or an alias): numbers largest first and
    names A-Z unless ``ascending`` says otherwise; unknown (NaN) values always last; ties keep order.
    """
    column, asc = resolve_column(table, by)
    if ascending is None:
        ascending = asc
    if column in STRING_COLUMNS:
        labels = table.labels(column)
        rank = np.argsort(np.argsort(np.asarray(labels.values, dtype=object), kind="stable"), kind="stable")
        key = rank[labels.codes].astype(np.float64) if labels.values else np.zeros(0)
        ascending = True if ascending is None else ascending
    else:
        # the running share grows fastest by total time: ordering "by cumulative" is by total
        key = numeric_columns(table)["total_us" if column == "cum_share" else column]
        ascending = False if ascending is None else ascending
    nan = np.isnan(key)
    sort_key = np.where(nan, np.inf, key if ascending else -key)
    return table.take(np.argsort(sort_key, kind="stable"))


def top(table: Calls, n: int) -> Calls:
    """The first ``n`` rows (all when n is 0)."""
    return table if n <= 0 or n >= len(table) else table.take(np.arange(n))


def _json_column(values: np.ndarray, count: bool) -> list[Any]:
    """A column's values for JSON: None where NaN; a count that is a whole number as an int."""
    out = np.asarray(values).astype(object)
    nan = np.isnan(values)
    if count:
        whole = np.flatnonzero(~nan & np.isfinite(values) & (values == np.floor(values)))
        out[whole] = [int(v) for v in np.asarray(values)[whole].tolist()]
    out[nan] = None
    return out.tolist()


def row_keys(table: Calls, has_device: bool | None = None) -> list[str]:
    """The keys of :func:`rows`, in order, also where ``table`` has no rows (``has_device``: whether the
    trace measured device time, which no row can say then; None: as ``table`` says)."""
    device = table.has_device if has_device is None else has_device
    cols = [c for c in (*NUMERIC_COLUMNS, *table.counters) if device or c not in ("device_us", "device_incl_us")]
    keys = ["name", "op_type", "provider", *(PUBLISHED.get(c, c) for c in cols), "calls", "in_shapes", "out_shapes",
            *(["rate_time"] if device else [])]  # the edge: analyze's published names
    return list(dict.fromkeys(keys))


def rows(table: Calls) -> list[dict[str, Any]]:
    """The table as row dicts with JSON names (:func:`row_keys`); None where unknown; device time only when
    measured, and then ``rate_time`` says what FLOP/s and bandwidth are over: "device" or "cpu" (self time)."""
    values = {c: table.labels(c).tolist() for c in ("name", "op_type", "provider")}
    values.update((PUBLISHED.get(key, key), _json_column(v, key in COUNT_COLUMNS))
                  for key, v in numeric_columns(table).items())
    values["calls"] = np.asarray(table.calls).astype(np.int64).tolist()  # a count: an int, not the float above
    values.update((c, table.labels(c).tolist()) for c in ("in_shapes", "out_shapes"))
    if table.has_device:
        values["rate_time"] = ["device" if d else "cpu" for d in on_device(table).tolist()]
    keys = row_keys(table)
    return [dict(zip(keys, row, strict=True)) for row in zip(*(values[k] for k in keys), strict=True)]


def check_grouping(by: str, how: str) -> None:
    """InputError for an unknown --aggregate-by or --aggregate."""
    if by not in GROUP_KEYS:
        raise InputError(f"unknown --aggregate-by {by!r}", hint=f"use one of: {', '.join(GROUP_KEYS)}")
    if how not in AGGREGATES:
        raise InputError(f"unknown --aggregate {how!r}", hint=f"use one of: {', '.join(AGGREGATES)}")


def grouped(table: Calls | Folded, by: str = "name", how: str = "sum", *, types: Sequence[str] = (),
            name: str | None = None) -> Calls:
    """The calls ``types`` and ``name`` keep, aggregated: from the event table, or from a trace folded
    as it was read (:class:`~layerperf.data.fold.Folded`), the same figures."""
    if isinstance(table, Folded):
        check_grouping(by, how)
        return table.table(by, how, types=types, name=None if name is None else compile_regex(name))
    return aggregate(filter_table(table, types=types, name=name), by, how)


def analyze(table: Calls | Folded, *, by: str = "name", how: str = "sum", order_by: str | None = None,
            top_n: int = 0, types: Sequence[str] = (), name: str | None = None,
            min_time_s: float | None = None) -> Calls:
    """filter -> aggregate -> min-time -> order -> top, as ``layerperf analyze`` does."""
    table = grouped(table, by, how, types=types, name=name)
    if min_time_s is not None:
        table = filter_table(table, min_time_s=min_time_s)
    table = order(table, order_by or ("calls" if how == "count" else SELF_US))
    return top(table, top_n)


# -- diff ------------------------------------------------------------------------------------------
DIFF_BY = ("name", "type")
DIFF_COLUMNS = ("key", "op_type", "calls_a", "calls_b", "time_a_us", "time_b_us", "delta_us", "delta_pct",
                "speedup", "only_in", "key_b", "op_type_b", "match")
# --order-by's short names of diff columns
DIFF_ORDER_ALIASES = {"delta": "delta_us", "time_a": "time_a_us", "time_b": "time_b_us", "a": "time_a_us",
                      "b": "time_b_us"}


def per_pass(table: Calls | Folded, by: str, how: str) -> Calls:
    """Each node's per-call time (``how``); by type, the sum of its nodes' per-call times."""
    if by not in DIFF_BY:
        raise InputError(f"unknown --by {by!r}", hint=f"use one of: {', '.join(DIFF_BY)}")
    per_node = grouped(table, "name", how)
    return per_node if by == "name" else aggregate(per_node, "type", "sum")


def diff(a: Calls | Folded, b: Calls | Folded, *, by: str = "name", how: str = "mean",
         match: str = "normalized") -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Per node (or op type) time in A and in B, delta (B - A) and speedup (A / B), and totals.

    Nodes are paired by name; with ``match="normalized"`` (the default) also across the renamings of
    graph optimizations and quantization (:mod:`layerperf.analysis.matching`), and a row says which rule paired
    it (``match``) and the node's name in B (``key_b``). A node found in one trace only is flagged
    ``only_in`` and counts as 0 on the other side; ``in_paired_scope_a``/``_b`` count those of them
    that ran inside a module paired across runtimes (a Linear's bias Add beside its paired MatMul).
    """

    ta, tb = per_pass(a, by, how), per_pass(b, by, how)
    if by != "name" and match == "normalized":
        return _diff_families(ta, tb)
    if by == "name":
        pairing = matching.pair_nodes(match_nodes(ta), match_nodes(tb), match)
    else:  # op types are compared as they are
        pairing = matching.pair_nodes(match_nodes(ta, "op_type"), match_nodes(tb, "op_type"), "exact")
    key_col = "name" if by == "name" else "op_type"
    ka, kb = ta.labels(key_col).tolist(), tb.labels(key_col).tolist()
    types_a, types_b = ta.op_type.tolist(), tb.op_type.tolist()
    partner = {i: (j, rule) for i, j, rule in pairing.pairs}
    out = []
    for i in range(len(ta)):
        j, rule = partner.get(i, (None, ""))
        out.append(_diff_row(ka[i], types_a[i], int(ta.calls[i]), 0 if j is None else int(tb.calls[j]),
                             float(ta.dur_ns[i]) / 1e3, 0.0 if j is None else float(tb.dur_ns[j]) / 1e3,
                             key_b=None if j is None else kb[j], op_type_b=None if j is None else types_b[j],
                             match=rule, only_in="A" if j is None else ""))
    for j in pairing.only_b:
        out.append(_diff_row(kb[j], types_b[j], 0, int(tb.calls[j]), 0.0, float(tb.dur_ns[j]) / 1e3,
                             key_b=kb[j], op_type_b=types_b[j], only_in="B"))
    total_a = sum(r["time_a_us"] for r in out)
    total_b = sum(r["time_b_us"] for r in out)
    totals = _diff_row("total", "", int(ta.calls.sum()), int(tb.calls.sum()), total_a, total_b)
    totals.update(only_in_a=sum(r["only_in"] == "A" for r in out), only_in_b=sum(r["only_in"] == "B" for r in out),
                  matched=len(pairing.pairs), matched_by=pairing.counts(), nodes_a=len(ta), nodes_b=len(tb),
                  match=match if by == "name" else "exact",
                  in_paired_scope_a=len(pairing.inside_a), in_paired_scope_b=len(pairing.inside_b))
    return out, totals


def node_pairing(a: Calls | Folded, b: Calls | Folded, *, how: str = "mean", match: str = "normalized"
                 ) -> tuple[list[Node], list[Node], matching.Pairing]:
    """The per-node rows of A and B as :func:`diff` pairs them (``by="name"``): their nodes and the pairing."""
    na, nb = match_nodes(per_pass(a, "name", how)), match_nodes(per_pass(b, "name", how))
    return na, nb, matching.pair_nodes(na, nb, match)


def _families(table: Calls) -> dict[str, tuple[list[str], int, float]]:
    """Per op family (:func:`layerperf.analysis.matching.op_family`): its op types, calls and time (µs)."""

    out: dict[str, tuple[list[str], int, float]] = {}
    for op_type, calls, dur_ns in zip(table.op_type.tolist(), table.calls.tolist(), table.dur_ns.tolist(),
                                      strict=True):
        types, n, us = out.get(op_family(op_type), ([], 0, 0.0))
        out[op_family(op_type)] = ([*types, op_type], n + int(calls), us + float(dur_ns) / 1e3)
    return out


def _diff_families(ta: Calls, tb: Calls) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``diff --by type``, normalized: one row per op family (Conv, FusedConv and QLinearConv are one)."""
    fa, fb = _families(ta), _families(tb)
    out = []
    for family in [*fa, *(f for f in fb if f not in fa)]:
        types_a, calls_a, time_a = fa.get(family, ([], 0, 0.0))
        types_b, calls_b, time_b = fb.get(family, ([], 0, 0.0))
        only_in = "B" if not types_a else "A" if not types_b else ""
        out.append(_diff_row(family, "/".join(types_a), calls_a, calls_b, time_a, time_b,
                             key_b=family if types_b else None, op_type_b="/".join(types_b) or None,
                             match="" if only_in else "exact" if types_a == types_b else "family",
                             only_in=only_in))
    totals = _diff_row("total", "", int(ta.calls.sum()), int(tb.calls.sum()),
                       sum(r["time_a_us"] for r in out), sum(r["time_b_us"] for r in out))
    matched = [r for r in out if not r["only_in"]]
    totals.update(only_in_a=sum(r["only_in"] == "A" for r in out), only_in_b=sum(r["only_in"] == "B" for r in out),
                  matched=len(matched), matched_by={rule: sum(r["match"] == rule for r in matched)
                                                    for rule in ("exact", "family")},
                  nodes_a=len(fa), nodes_b=len(fb), match="normalized")
    return out, totals


def match_nodes(table: Calls, key_col: str = "name") -> list[Node]:
    """The rows of a per-node table as :class:`~layerperf.analysis.matching.Node` (output tensors when known)."""

    outputs = table.meta.get("outputs") or {}
    covers = table.meta.get("covers") or {} if key_col == "name" else {}
    keys, types = table.labels(key_col).tolist(), table.op_type.tolist()
    ins, outs = table.in_shapes.tolist(), table.out_shapes.tolist()
    flops = [None if f != f else f for f in table.flops.tolist()]  # NaN: unknown
    return [Node(k, t, tuple(outputs.get(k, ())), i, o, f, tuple(covers.get(k, ())))
            for k, t, i, o, f in zip(keys, types, ins, outs, flops, strict=True)]


def _diff_row(key: str, op_type: str, calls_a: int, calls_b: int, time_a: float, time_b: float, *,
              key_b: str | None = None, op_type_b: str | None = None, match: str = "",
              only_in: str = "") -> dict[str, Any]:
    # A node found on one side only ran 0 times for 0 µs on the other: its delta is all of its time,
    # its relative change -100% when it is gone and undefined (no base) when it is new.
    delta = time_b - time_a
    return {
        "key": key, "op_type": op_type, "calls_a": calls_a, "calls_b": calls_b, "time_a_us": time_a,
        "time_b_us": time_b, "delta_us": delta,
        "delta_pct": delta / time_a if time_a else None,
        "speedup": time_a / time_b if time_a and time_b else None,
        "only_in": only_in, "key_b": key_b, "op_type_b": op_type_b, "match": match,
    }


def order_diff(rows_: Iterable[dict[str, Any]], by: str = "delta") -> list[dict[str, Any]]:
    """Diff rows by |delta| (default), or by another diff column: numbers largest first and names A-Z,
    ``+COLUMN`` ascending and ``-COLUMN`` descending (as ``analyze --order-by``); unknown values last."""
    name, ascending = _direction(by)
    column = DIFF_ORDER_ALIASES.get(name, name)
    if column not in DIFF_COLUMNS:
        raise InputError(f"unknown --order-by column {by!r}",
                         hint=f"valid: delta, {', '.join(c for c in DIFF_COLUMNS if c != 'delta_us')} "
                              "(prefix + for ascending)")
    items = list(rows_)
    if column in ("key", "op_type", "only_in", "key_b", "op_type_b", "match"):
        named = sorted((r for r in items if r[column]), key=lambda r: str(r[column]), reverse=ascending is False)
        return named + [r for r in items if not r[column]]  # rows without one last, either way
    if column == "delta_us":
        return sorted(items, key=lambda r: abs(r["delta_us"]) * (1 if ascending else -1))
    sign = 1 if ascending else -1
    return sorted(items, key=lambda r: (r[column] is None, sign * (r[column] or 0.0)))
