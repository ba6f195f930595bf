"""The store: an SQLite database (the standard library's) holding a sweep's configurations and layers.

Nothing finished is lost: each configuration — its ``configs`` row, its ``layers`` rows, its machine —
is written in one transaction when it finishes (:meth:`Store.write`), in WAL mode with full syncs, so
that a collect killed at any moment (SIGINT, SIGKILL) leaves every finished configuration and a
readable store; the one being measured is simply not there. ``config_key`` is unique: writing a
configuration the store holds adds nothing (a failed one is replaced when it succeeds later).

A store that is not one — not an SQLite file, another program's database, a damaged file, one written
by a newer layerperf — is refused in one line (InputError) before anything is written.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import astuple
from pathlib import Path
from typing import Any

from layerperf import __version__
from layerperf.data.metadata import now
from layerperf.dataset.fingerprint import Fingerprint
from layerperf.dataset.measure import ConfigResult
from layerperf.dataset.schema import (
    CONFIG_COLUMNS,
    DDL,
    LAYER_FIELDS,
    MACHINE_COLUMNS,
    MIGRATIONS,
    SCHEMA_VERSION,
    TABLES,
    VIEWS,
    add_column,
)
from layerperf.errors import InputError

BUSY_TIMEOUT_MS = 60_000  # a reader (an export, a notebook) may hold the store for a moment


class Store:
    """An open store. :meth:`open` checks (and with ``create`` makes) one; use it as a context manager."""

    def __init__(self, path: Path, db: sqlite3.Connection) -> None:
        self.path, self.db = path, db

    @classmethod
    def open(cls, path: str | Path, *, create: bool = False, writable: bool = True) -> Store:
        """The store at ``path``: made (with its parent folders) when missing and ``create``; else an
        InputError in one line for a missing, damaged or foreign file. Not ``writable`` (what reads a store
        without collecting into it: ``predict``), the file is never changed: a store of an older schema is
        brought up to date in a copy in memory."""
        path = Path(path)
        if path.is_dir():
            raise InputError(f"{path} is a directory, not a store", hint="give the store's file, e.g. data.db")
        fresh = not path.exists() or path.stat().st_size == 0
        if fresh and not create:
            raise InputError(f"no store at {path}", hint="collect into it first: layerperf collect --store PATH ...")
        made = False  # whether this process made the file: only such a file is removed when making it fails
        if fresh:
            if path.parent.exists() and not path.parent.is_dir():
                raise InputError(f"cannot make the store {path}: {path.parent} is a file, not a folder")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise InputError(f"cannot make the store {path}: {exc.strerror} ({exc.filename})") from None
            try:
                os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
                made = True
            except FileExistsError:  # another collect made it a moment ago: it is that one's to fill
                pass
            except OSError as exc:
                raise InputError(f"cannot make the store {path}: {exc.strerror} ({exc.filename})") from None
        try:
            db = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
        except sqlite3.Error as exc:
            raise InputError(f"cannot open the store {path}: {exc}") from None
        store = cls(path, db)
        try:
            deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
            while True:  # a journal-mode change another opener of a new store holds up waits for no busy handler
                try:
                    store._check_or_make(fresh or create, writable)
                    break
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc) or time.monotonic() > deadline:
                        raise InputError(f"cannot open the store {path}: {exc}") from None
                    time.sleep(0.05)
        except BaseException:
            db.close()
            if made:
                path.unlink(missing_ok=True)
            raise
        return store

    def _check_or_make(self, fresh: bool, writable: bool = True) -> None:
        """Check the store (``fresh``: an empty database may be made one); two collects that start together
        on a new store make it once, the other finding it made."""
        try:
            self.db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            ok = self.db.execute("PRAGMA quick_check(1)").fetchone()[0]
            tables = self._tables()
        except sqlite3.DatabaseError as exc:
            raise InputError(f"{self.path} is not a layerperf store: {exc}") from None
        if ok != "ok":
            first = " ".join(str(ok).replace("***", "").split())
            raise InputError(f"the store {self.path} is damaged: {first}",
                             hint="collect into a new store; `sqlite3 STORE .recover` may save the rest")
        if not tables and fresh and self._make():
            return
        if not tables:  # made by another process meanwhile
            tables = self._tables()
        version = self._check_schema(tables)
        addable = self._lacking(version)  # before the migrations: a refused store is left untouched
        if writable:
            self.db.execute("PRAGMA journal_mode = WAL")
            self.db.execute("PRAGMA synchronous = FULL")
        elif addable or version < SCHEMA_VERSION:  # read as it will be, the file as it is
            copy = sqlite3.connect(":memory:", isolation_level=None)
            self.db.backup(copy)
            self.db.close()
            self.db = copy
        if addable:
            with self.transaction():
                for statement in addable:
                    self.db.execute(statement)
        self._migrate(version)

    def _tables(self) -> set[str]:
        return {r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}

    def _make(self) -> bool:
        """Make the tables, in one transaction; False when another process made them first (a write
        transaction waits for the other's to end, then sees its tables)."""
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("PRAGMA synchronous = FULL")
        with self.transaction():
            if self._tables():
                return False
            for statement in DDL.split(";\n"):
                self.db.execute(statement)
            self.db.execute("INSERT INTO schema_version VALUES (?, ?, ?)", (SCHEMA_VERSION, __version__, now()))
        return True

    def _migrate(self, version: int) -> None:
        """A store of an older schema brought up to this one, one version per transaction: columns added, and
        with the last the views made anew (they show columns a version added)."""
        for target in range(version + 1, SCHEMA_VERSION + 1):
            with self.transaction():
                for column in MIGRATIONS[target]:
                    self.db.execute(add_column(*column))
                if target == SCHEMA_VERSION:
                    for name, statement in VIEWS.items():
                        self.db.execute(f"DROP VIEW IF EXISTS {name}")
                        self.db.execute(statement)
                self.db.execute("INSERT INTO schema_version VALUES (?, ?, ?)", (target, __version__, now()))

    def _check_schema(self, tables: set[str]) -> int:
        """The store's schema version; InputError when it is no layerperf store or a newer one's."""
        if "schema_version" not in tables:
            raise InputError(f"{self.path} is an SQLite database but not a layerperf store (no schema_version table)")
        row = self.db.execute("SELECT max(version) FROM schema_version").fetchone()
        version = row[0] if row else None
        if not isinstance(version, int):
            raise InputError(f"{self.path}: the store's schema_version table holds no version")
        if version > SCHEMA_VERSION:
            raise InputError(f"{self.path} was written by a newer layerperf (store schema {version}; this one "
                             f"reads up to {SCHEMA_VERSION})", hint="upgrade layerperf")
        missing = sorted(set(TABLES) - tables)
        if missing:
            raise InputError(f"{self.path}: a layerperf store without its {', '.join(missing)} table(s)")
        return version

    def _lacking(self, version: int) -> list[str]:
        """What adds the columns a table of schema ``version`` lacks (a store made by a development build
        before the schema settled; those the migrations add excepted): a nullable one, NULL (unknown) in
        every row; InputError when one that must hold a value is missing."""
        added = _added_pairs(version)
        addable: list[str] = []
        for table, columns in TABLES.items():
            have = {r[1] for r in self.db.execute(f"PRAGMA table_info({table})")}
            lacking = [(name, kind) for name, kind in columns if name not in have and (table, name) not in added]
            required = [name for name, kind in lacking if "NOT NULL" in kind or "PRIMARY KEY" in kind]
            if required:
                raise InputError(f"{self.path}: its {table} table has no column {', '.join(required)} "
                                 f"(written by an earlier build of layerperf)",
                                 hint="collect into a new store")
            addable += [add_column(table, name, kind) for name, kind in lacking]
        return addable

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One write transaction: committed whole, or rolled back whole (an interrupt included)."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    # -- reading ---------------------------------------------------------------------------------
    def statuses(self) -> dict[str, str]:
        """config_key -> status of every configuration the store holds."""
        return dict(self.db.execute("SELECT config_key, status FROM configs").fetchall())

    def fingerprints(self) -> list[Fingerprint]:
        """The machines the store's configurations ran on."""
        cur = self.db.execute("SELECT * FROM machines")
        names = [d[0] for d in cur.description]
        return [Fingerprint.from_row(dict(zip(names, row, strict=True))) for row in cur.fetchall()]

    def counts(self) -> dict[str, int]:
        """Rows per table, and configurations ok and failed."""
        out = {t: self.db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}
        for status in ("ok", "failed"):
            out[status] = self.db.execute("SELECT count(*) FROM configs WHERE status = ?", (status,)).fetchone()[0]
        return out

    # -- writing ---------------------------------------------------------------------------------
    def write(self, result: ConfigResult) -> bool:
        """Store one configuration's result in one transaction. False (nothing written) where the store
        already holds it ok, or holds it failed and this result failed too."""
        key = result.config.key()
        with self.transaction():
            held = self.db.execute("SELECT config_id, status FROM configs WHERE config_key = ?", (key,)).fetchone()
            if held is not None:
                if held[1] == "ok" or result.status == "failed":
                    return False
                self.db.execute("DELETE FROM layers WHERE config_id = ?", (held[0],))
                self.db.execute("DELETE FROM configs WHERE config_id = ?", (held[0],))
            self._insert("machines", result.fingerprint.row(), MACHINE_COLUMNS, ignore=True)
            config_id = self._insert("configs", _config_row(result), CONFIG_COLUMNS)
            marks = ", ".join("?" * (len(LAYER_FIELDS) + 1))
            self.db.executemany(f"INSERT INTO layers (config_id, {', '.join(LAYER_FIELDS)}) VALUES ({marks})",
                                [(config_id, *astuple(r)) for r in result.records])
        return True

    def _insert(self, table: str, row: dict[str, Any], columns: tuple[tuple[str, str], ...], *,
                ignore: bool = False) -> int:
        names = [c for c, _ in columns if c in row]
        verb = "INSERT OR IGNORE" if ignore else "INSERT"
        cur = self.db.execute(f"{verb} INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
                              [row[n] for n in names])
        return int(cur.lastrowid or 0)


def _added_pairs(version: int) -> set[tuple[str, str]]:
    """(table, column) of every column the migrations after ``version`` add."""
    return {(table, name) for v, columns in MIGRATIONS.items() if v > version for table, name, _ in columns}


def _config_row(r: ConfigResult) -> dict[str, Any]:
    c = r.config
    return {
        "config_key": c.key(), "alone_key": c.alone_key(), "model": c.model, "backend": c.backend, "batch": c.batch,
        "threads": c.threads, "opt_level": c.opt_level, "inter_op": c.inter_op, "cpus": c.cpus, "corun": c.corun,
        "corun_cores": c.corun_cores, "events": c.events, "runs": c.runs, "warmup": c.warmup,
        "status": r.status, "reason": r.reason, "machine_id": r.fingerprint.machine_id, "worker": r.worker,
        "started": r.started, "finished": now(), "wall_s": r.wall_s, "layers": len(r.records),
        "runs_measured": r.runs_measured, "runs_used": r.runs_used, "runs_slowed": r.runs_slowed,
        "slowed_used": None if r.slowed_used is None else int(r.slowed_used), "runs_disturbed": r.runs_disturbed,
        "disturbed_used": None if r.disturbed_used is None else int(r.disturbed_used), "attempts": r.attempts,
        "yardstick_ref_ns": r.yardstick_ref_ns, "yardstick_median_ns": r.yardstick_median_ns,
        "latency_median_us": r.latency_median_us, "latency_p90_us": r.latency_p90_us, "run_cpus": r.run_cpus,
        "corun_cpus": r.corun_cpus, "corun_calls_per_s": r.corun_calls_per_s, "warnings": r.warnings,
        "target": c.target, "tune": c.tune, "model_seed": c.model_seed,
    }
