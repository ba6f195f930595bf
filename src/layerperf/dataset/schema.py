"""The store's schema: tables, indexes and views, version 3 (README "The store" documents it).

- ``schema_version``: one row, the version of this schema the store holds and the layerperf that made it.
- ``machines``: one row per machine fingerprint (:class:`~layerperf.dataset.fingerprint.Fingerprint`).
- ``configs``: one row per (model, configuration): its key and factors, ok or failed and why, where and
  when it ran, how its runs went (slowed runs set aside, the flag), whole-model latency.
- ``layers``: one row per layer of an ok configuration: ``config_id`` and every field of
  :class:`~layerperf.data.records.LayerRecord`, as its type says.
- views: ``measured_layers`` (each layer with its configuration's factors) and ``interference`` (each
  layer measured beside a co-runner against the same layer measured alone).

A column is only ever added (with a new version and its migration, :data:`MIGRATIONS`); the version
tells a reader what it may find. Version 2 added a compiling backend's factors (``configs.target``,
``configs.tune``) and the per-layer ``schedule``, ``tuning_state`` and ``target`` (TVM); version 3 a
built-in model's build seed (``configs.model_seed``, 0 in the rows of stores made before it, which had
none) and shows it in both views. The views are derived: a migration makes them anew (:data:`VIEWS`).
"""

from __future__ import annotations

import dataclasses

from layerperf.data.records import LayerRecord

SCHEMA_VERSION = 3

# LayerRecord's annotations (strings: postponed evaluation) -> SQLite column types
_SQL_TYPES = {"int": "INTEGER NOT NULL", "int | None": "INTEGER", "float": "REAL NOT NULL", "float | None": "REAL",
              "str": "TEXT NOT NULL", "str | None": "TEXT", "bool": "INTEGER NOT NULL", "bool | None": "INTEGER"}

LAYER_FIELDS = tuple(f.name for f in dataclasses.fields(LayerRecord))

SEED_COLUMN = "INTEGER NOT NULL DEFAULT 0"

MACHINE_COLUMNS = (
    ("machine_id", "TEXT PRIMARY KEY"), ("cpu", "TEXT"), ("cores", "INTEGER"), ("affinity", "INTEGER"),
    ("memory_bytes", "INTEGER"), ("kernel", "TEXT"), ("os", "TEXT"), ("arch", "TEXT"), ("python", "TEXT"),
    ("l1d_bytes", "INTEGER"), ("l1i_bytes", "INTEGER"), ("l2_bytes", "INTEGER"), ("l3_bytes", "INTEGER"),
    ("hostname", "TEXT NOT NULL"), ("layerperf_version", "TEXT NOT NULL"), ("runtimes", "TEXT NOT NULL"),
)

CONFIG_COLUMNS = (
    ("config_id", "INTEGER PRIMARY KEY"), ("config_key", "TEXT NOT NULL UNIQUE"), ("alone_key", "TEXT NOT NULL"),
    # the factors (the key's fields)
    ("model", "TEXT NOT NULL"), ("backend", "TEXT NOT NULL"), ("batch", "INTEGER"), ("threads", "INTEGER NOT NULL"),
    ("opt_level", "TEXT"), ("inter_op", "INTEGER"), ("cpus", "TEXT NOT NULL"), ("corun", "TEXT NOT NULL"),
    ("corun_cores", "TEXT NOT NULL"), ("events", "TEXT NOT NULL"), ("runs", "INTEGER NOT NULL"),
    ("warmup", "INTEGER NOT NULL"),
    # the outcome
    ("status", "TEXT NOT NULL CHECK (status IN ('ok', 'failed'))"), ("reason", "TEXT"),
    ("machine_id", "TEXT NOT NULL REFERENCES machines(machine_id)"), ("worker", "TEXT NOT NULL"),
    ("started", "TEXT NOT NULL"), ("finished", "TEXT NOT NULL"), ("wall_s", "REAL NOT NULL"),
    ("layers", "INTEGER NOT NULL"), ("runs_measured", "INTEGER"), ("runs_used", "INTEGER"),
    ("runs_slowed", "INTEGER"), ("slowed_used", "INTEGER"), ("runs_disturbed", "INTEGER"),
    ("disturbed_used", "INTEGER"), ("attempts", "INTEGER NOT NULL"),
    ("yardstick_ref_ns", "REAL"), ("yardstick_median_ns", "REAL"), ("latency_median_us", "REAL"),
    ("latency_p90_us", "REAL"), ("run_cpus", "TEXT NOT NULL"), ("corun_cpus", "TEXT NOT NULL"),
    ("corun_calls_per_s", "REAL"), ("warnings", "TEXT NOT NULL"),
    # a compiling backend's factors (version 2): NULL where the backend compiles nothing
    ("target", "TEXT"), ("tune", "INTEGER"),
    # a built-in model's build seed (version 3): 0 for a file
    ("model_seed", SEED_COLUMN),
)


def _layer_columns() -> list[tuple[str, str]]:
    cols = [("config_id", "INTEGER NOT NULL REFERENCES configs(config_id)")]
    for f in dataclasses.fields(LayerRecord):
        cols.append((f.name, _SQL_TYPES[str(f.type)]))
    return cols


LAYER_COLUMNS = tuple(_layer_columns())
TABLES = {"machines": MACHINE_COLUMNS, "configs": CONFIG_COLUMNS, "layers": LAYER_COLUMNS}


# version -> the (table, column, type) it adds to a store of the version before it
MIGRATIONS = {
    2: [("configs", "target", "TEXT"), ("configs", "tune", "INTEGER"), ("layers", "schedule", "TEXT"),
        ("layers", "tuning_state", "TEXT"), ("layers", "target", "TEXT")],
    3: [("configs", "model_seed", SEED_COLUMN)],
}


def add_column(table: str, name: str, kind: str) -> str:
    """The statement adding one column (NULL in every row already there)."""
    return f"ALTER TABLE {table} ADD COLUMN {name} {kind}"


def _table(name: str, columns: tuple[tuple[str, str], ...], extra: str = "") -> str:
    body = ",\n  ".join(f"{col} {kind}" for col, kind in columns)
    return f"CREATE TABLE {name} (\n  {body}{extra}\n);"


# the configuration factors the views show beside each layer (the others are the record's own fields)
_FACTORS = ("opt_level", "inter_op", "model_seed", "cpus", "run_cpus", "corun", "corun_cores", "events", "machine_id",
            "runs_slowed", "slowed_used", "runs_disturbed", "disturbed_used")

# name -> statement of each view; made with the tables, and made anew by a migration (they are derived)
VIEWS = {
    "measured_layers": "CREATE VIEW measured_layers AS SELECT l.*, " + ", ".join(f"c.{f}" for f in _FACTORS)
    + " FROM layers l JOIN configs c ON c.config_id = l.config_id WHERE c.status = 'ok'",
    "interference": """CREATE VIEW interference AS
SELECT c.config_id, c.model, c.backend, c.batch, c.threads, c.model_seed, c.corun, c.corun_cores, c.run_cpus,
       c.corun_cpus, l.layer_index, l.name, l.op_type, a.median_us AS alone_us, l.median_us AS corun_us,
       l.median_us / a.median_us AS factor
FROM configs c
JOIN configs b ON b.config_key = c.alone_key AND b.status = 'ok'
JOIN layers l ON l.config_id = c.config_id
JOIN layers a ON a.config_id = b.config_id AND a.layer_index = l.layer_index AND a.name = l.name
WHERE c.corun != '' AND c.status = 'ok' AND a.median_us > 0""",
}

DDL = "\n".join([
    "CREATE TABLE schema_version (version INTEGER NOT NULL, layerperf_version TEXT NOT NULL, created TEXT NOT NULL);",
    _table("machines", MACHINE_COLUMNS),
    _table("configs", CONFIG_COLUMNS),
    _table("layers", LAYER_COLUMNS, ",\n  PRIMARY KEY (config_id, layer_index)"),
    "CREATE INDEX configs_model ON configs (model, backend);",
    "CREATE INDEX configs_status ON configs (status);",
    "CREATE INDEX configs_alone ON configs (alone_key);",
    "CREATE INDEX layers_op_type ON layers (op_type);",
    *(f"{statement};" for statement in VIEWS.values()),
])
