"""The store, read for the predictor through its documented schema (README "The store"): plain SQL on
the ``configs``, ``layers`` and ``machines`` columns the README lists, so the collector may add
columns, views and tables without the predictor noticing.

Every ``ok`` configuration becomes a :class:`MeasuredConfig`: its factors, its layers with their
measured self times (median per call, µs) and its whole-model latency (median, profiler off), with
how its runs went — the runs the speed check set aside as slowed, and the flag of a configuration
measured during a host slow-down.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from layerperf.dataset.fingerprint import Fingerprint
from layerperf.dataset.predict.features import Op, RunFactors
from layerperf.dataset.store import Store
from layerperf.dataset.sweep import other_hardware
from layerperf.errors import InputError

CONFIG_SQL = """
SELECT c.config_id, c.model, c.backend, c.batch, c.threads, c.opt_level, c.inter_op, c.run_cpus, c.corun,
       c.corun_cores, c.model_seed, c.latency_median_us, c.runs_measured, c.runs_slowed, c.slowed_used, {disturbed},
       c.machine_id,
       m.affinity, m.cores, m.l2_bytes, m.l3_bytes
FROM configs c LEFT JOIN machines m ON m.machine_id = c.machine_id
WHERE c.status = 'ok' ORDER BY c.config_id"""
# added to the schema later: a store collected before has neither (unknown)
DISTURBED = ("runs_disturbed", "disturbed_used")

LAYER_SQL = """
SELECT l.config_id, l.name, l.op_type, l.domain, l.in_shapes, l.out_shapes, l.in_dtypes, l.out_dtypes, l.flops,
       l.int_ops, l.bytes_read, l.bytes_written, l.param_bytes, l.padded_flops, l.median_us
FROM layers l JOIN configs c ON c.config_id = l.config_id
WHERE c.status = 'ok' ORDER BY l.config_id, l.layer_index"""


@dataclass(frozen=True, slots=True)
class MeasuredConfig:
    """One ok (model, configuration) of the store. ``layer_us``: each layer's median self time (None where
    the store has none); ``latency_us``: the whole model's median latency (None: not measured);
    ``runs_slowed`` and ``runs_disturbed``: runs the speed checks set aside, measured while the CPU ran
    slowed or while other processes had it (None: the store does not say); ``flagged``: its statistics
    stand on such runs; ``model_seed``: a built-in model's build seed (0 for a file)."""

    config_id: int
    model: str
    factors: RunFactors
    ops: tuple[Op, ...]
    layer_us: tuple[float | None, ...]
    latency_us: float | None
    runs_measured: int | None
    runs_slowed: int | None
    runs_disturbed: int | None
    flagged: bool
    model_seed: int = 0

    @property
    def set_aside(self) -> int:
        """Runs the speed checks set aside, slowed or disturbed (0 where the store does not say)."""
        return (self.runs_slowed or 0) + (self.runs_disturbed or 0)

    @property
    def layers_us(self) -> float | None:
        """The layers' measured times summed; None where one is unknown."""
        if any(t is None for t in self.layer_us):
            return None
        return float(sum(t for t in self.layer_us if t is not None))

    def label(self) -> str:
        """``resnet18 b8 t2`` and the factors that differ from a plain run."""
        f = self.factors
        parts = [Path(self.model).name, *([f"b{f.batch}"] if f.batch is not None else []), f"t{f.threads}"]
        parts += [] if f.opt_level in (None, "all") else [str(f.opt_level)]
        parts += [] if f.inter_op is None else [f"inter-op {f.inter_op}"]
        parts += [f"corun ({'shared' if f.corun_shared else 'separate'})"] if f.corun else []
        parts += [f"model seed {self.model_seed}"] if self.model_seed else []
        return " ".join(parts)


@dataclass(frozen=True, slots=True)
class StoreData:
    """What the predictor reads from one store."""

    source: str  # the store's path; several, comma-separated
    configs: tuple[MeasuredConfig, ...]
    fingerprints: tuple[Fingerprint, ...]

    def models(self) -> list[str]:
        """The models with at least one ok configuration, in the store's order."""
        return list(dict.fromkeys(c.model for c in self.configs))


def _factors(row: dict[str, Any]) -> RunFactors:
    pinned = [c for c in str(row["run_cpus"] or "").split(",") if c]
    cpus = _cpu_count(pinned) if pinned else (row["affinity"] or row["cores"])
    return RunFactors(backend=str(row["backend"]), batch=row["batch"], threads=int(row["threads"]),
                      opt_level=row["opt_level"], inter_op=row["inter_op"], cpu_count=cpus,
                      corun=bool(row["corun"]), corun_shared=row["corun_cores"] == "shared",
                      l2_bytes=row["l2_bytes"], l3_bytes=row["l3_bytes"])


def _cpu_count(items: list[str]) -> int:
    """CPUs in a list such as ``0-1,4``."""
    n = 0
    for item in items:
        lo, _, hi = item.partition("-")
        n += int(hi) - int(lo) + 1 if hi else 1
    return n


def _rows(db: sqlite3.Connection, sql: str) -> list[dict[str, Any]]:
    cur = db.execute(sql)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def read(path: str | Path) -> StoreData:
    """The store's ok configurations; InputError in one line for a missing, damaged or foreign store, one
    whose schema lacks a column the predictor reads, or one with nothing measured."""
    with Store.open(path, writable=False) as store:
        try:
            have = {row[1] for row in store.db.execute("PRAGMA table_info(configs)")}
            disturbed = ", ".join(f"c.{c}" if c in have else f"NULL AS {c}" for c in DISTURBED)
            configs = _rows(store.db, CONFIG_SQL.format(disturbed=disturbed))
            layers = _rows(store.db, LAYER_SQL)
        except sqlite3.OperationalError as exc:
            raise InputError(f"{path}: the store lacks what the predictor reads ({exc})",
                             hint="collect it with this layerperf") from None
        except sqlite3.DatabaseError as exc:
            raise InputError(f"the store {path} cannot be read: {exc}") from None
        fingerprints = tuple(store.fingerprints())
    by_config: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in layers:
        by_config[row["config_id"]].append(row)
    out = []
    for row in configs:
        rows = by_config.get(row["config_id"], [])
        if not rows:
            continue
        out.append(MeasuredConfig(
            config_id=row["config_id"], model=str(row["model"]), factors=_factors(row),
            ops=tuple(Op.of_row(r) for r in rows), layer_us=tuple(r["median_us"] for r in rows),
            latency_us=row["latency_median_us"], runs_measured=row["runs_measured"], runs_slowed=row["runs_slowed"],
            runs_disturbed=row["runs_disturbed"], flagged=bool(row["slowed_used"] or row["disturbed_used"]),
            model_seed=int(row["model_seed"] or 0)))
    if not out:
        raise InputError(f"the store {path} holds no measured configuration to learn from",
                         hint="collect into it first: layerperf collect --models ... --store PATH")
    return StoreData(str(path), tuple(out), fingerprints)


def read_all(paths: list[str] | tuple[str, ...]) -> StoreData:
    """The ok configurations of every store in ``paths``, together (see :func:`read`)."""
    parts = [read(p) for p in paths]
    configs = tuple(c for part in parts for c in part.configs)
    prints = tuple(dict.fromkeys(f for part in parts for f in part.fingerprints))
    return StoreData(", ".join(map(str, paths)), configs, prints)


def other_machines(path: str | Path) -> list[tuple[Fingerprint, Fingerprint]]:
    """(a machine of the store, this one) where the store's measurements come from other hardware."""
    with Store.open(path, writable=False) as store:
        return other_hardware(store, [Fingerprint.here()])
