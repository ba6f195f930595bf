"""The store as Parquet: one file per table (``machines.parquet``, ``configs.parquet``, ``layers.parquet``).

Column types follow the schema (INTEGER -> int64, REAL -> float64, TEXT -> string, NULL kept). Written
with pyarrow, else duckdb (``pip install 'layerperf[parquet]'`` brings pyarrow); each file whole or not
at all: written beside its target and renamed.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from layerperf.dataset.schema import TABLES
from layerperf.dataset.store import Store
from layerperf.errors import InputError, MissingDependency
from layerperf.util import atomic

INSTALL_HINT = "pip install 'layerperf[parquet]'"


def _kind(sql_type: str) -> str:
    word = sql_type.split()[0]
    return {"INTEGER": "int64", "REAL": "float64"}.get(word, "string")


def writer_or_refuse() -> None:
    """MissingDependency (one line, how to install) where no Parquet writer is installed."""
    _writer()


def _writer() -> Any:
    """The Parquet writer available: pyarrow first, duckdb else."""
    try:
        import pyarrow  # noqa: F401

        return _write_pyarrow
    except ImportError:
        pass
    try:
        import duckdb  # noqa: F401

        return _write_duckdb
    except ImportError:
        raise MissingDependency("a Parquet writer (pyarrow or duckdb)", INSTALL_HINT) from None


def _write_pyarrow(path: Path, columns: list[tuple[str, str]], rows: list[tuple[Any, ...]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    types = {"int64": pa.int64(), "float64": pa.float64(), "string": pa.string()}
    schema = pa.schema([(name, types[kind]) for name, kind in columns])
    data = {name: [r[i] for r in rows] for i, (name, _) in enumerate(columns)}
    pq.write_table(pa.Table.from_pydict(data, schema=schema), path)


def _write_duckdb(path: Path, columns: list[tuple[str, str]], rows: list[tuple[Any, ...]]) -> None:
    import duckdb

    types = {"int64": "BIGINT", "float64": "DOUBLE", "string": "VARCHAR"}
    con = duckdb.connect()
    try:
        con.execute("CREATE TABLE t (" + ", ".join(f'"{n}" {types[k]}' for n, k in columns) + ")")
        if rows:
            con.executemany(f"INSERT INTO t VALUES ({', '.join('?' * len(columns))})", rows)
        con.execute(f"COPY t TO '{path}' (FORMAT parquet)")
    finally:
        con.close()


def check_target(out_dir: str | Path) -> Path:
    """``out_dir`` as a folder Parquet files can be written into (made when missing, with its parents);
    InputError in one line where a file stands in the way or the folder cannot be written (before a sweep:
    not after it)."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError(f"--export {out} is a file, not a directory")
    return atomic.check_dir(out)


def export(store: Store, out_dir: str | Path) -> dict[str, Path]:
    """Write every table of ``store`` as Parquet into ``out_dir`` (made when missing); table -> file."""
    write = _writer()
    out = check_target(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"--export {out}: {exc.strerror} ({exc.filename})") from None
    written = {}
    for table, schema_cols in TABLES.items():
        columns = [(name, _kind(kind)) for name, kind in schema_cols]
        rows = store.db.execute(f"SELECT {', '.join(n for n, _ in columns)} FROM {table}").fetchall()
        target = out / f"{table}.parquet"
        fd, tmp = tempfile.mkstemp(prefix=f".{table}-", suffix=".parquet", dir=out)
        os.close(fd)
        try:
            os.unlink(tmp)  # duckdb's COPY writes a new file
            write(Path(tmp), columns, rows)
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        written[table] = target
    return written
