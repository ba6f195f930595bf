"""``layerperf collect --backend tvm``: TVM's target and tuning trials are factors of a configuration (in its
key only where they apply, so other backends' keys stay as older stores hold them), its rows carry the
target, the tuning state and each kernel's schedule, its timed runs are bracketed by the run plan's
between-runs hook like the other backends', and a store of schema 1 is brought up to schema 2."""

from __future__ import annotations

import importlib.util
import os
import sqlite3
from pathlib import Path

import pytest

from layerperf.backends.base import RunPlan
from layerperf.cli import main
from layerperf.dataset.config import Axes, Config, expand
from layerperf.dataset.fingerprint import Fingerprint
from layerperf.dataset.measure import ConfigResult
from layerperf.dataset.schema import SCHEMA_VERSION
from layerperf.dataset.store import Store
from tvm_models import own_cache, save, two_matmuls  # noqa: F401

needs_tvm = pytest.mark.skipif(importlib.util.find_spec("tvm") is None, reason="apache-tvm is not installed")
OLD_KEY = ("model=resnet18;backend=onnxruntime;batch=1;threads=2;opt_level=all;inter_op=seq;cpus=;corun=;"
           "corun_cores=;events=;runs=10;warmup=3")


def test_compile_factors_apply_to_tvm_only_and_other_keys_are_unchanged() -> None:
    assert Config(model="resnet18", backend="onnxruntime", batch=1, threads=2, opt_level="all").key() == OLD_KEY
    configs = expand(Axes(models=("resnet18",), backends=("onnxruntime", "tvm"), targets=("llvm", "llvm -mcpu=znver4"),
                          tunes=(0, 64)))
    ort = [c for c in configs if c.backend == "onnxruntime"]
    tvm = [c for c in configs if c.backend == "tvm"]
    assert len(ort) == 1 and ort[0].target is None and ort[0].tune is None
    assert len(tvm) == 4 and tvm[0].opt_level is None and tvm[0].inter_op is None  # ORT's factors collapse
    assert tvm[0].key().endswith(";warmup=3;target=llvm;tune=0")
    assert tvm[0].backend_options() == {"target": "llvm", "tune": 0}
    assert tvm[3].label().endswith("target llvm -mcpu=znver4 tune 64") and tvm[0].label().endswith("untuned")


def _downgrade_to_schema_1(path: Path) -> None:
    """The store as layerperf wrote it before schema 2: without the compile factors and TVM's columns (nor the
    seed of schema 3)."""
    db = sqlite3.connect(path)
    db.execute("DROP VIEW measured_layers")  # its l.* would keep the dropped columns referenced
    db.execute("DROP VIEW interference")  # and its c.model_seed
    for table, column in (("configs", "target"), ("configs", "tune"), ("layers", "schedule"),
                          ("layers", "tuning_state"), ("layers", "target"), ("configs", "model_seed")):
        db.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    db.execute("CREATE VIEW measured_layers AS SELECT l.*, c.opt_level FROM layers l JOIN configs c "
               "ON c.config_id = l.config_id WHERE c.status = 'ok'")
    db.execute("DELETE FROM schema_version")
    db.execute("INSERT INTO schema_version VALUES (1, '0.1', '2026-01-01')")
    db.commit()
    db.close()


def test_a_schema_2_store_gets_the_model_seed_in_its_table_and_views(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    old = Config(model="m", backend="onnxruntime", batch=None, threads=1, corun="Relu:X=8", corun_cores="shared")
    with Store.open(path, create=True) as store:
        store.write(ConfigResult(old, Fingerprint.here(), "ok", None, "2026-01-01T00:00:00+00:00", 1.0, attempts=1))
    db = sqlite3.connect(path)
    for view in ("measured_layers", "interference"):  # as schema 2 made them: no model_seed
        db.execute(f"DROP VIEW {view}")
    db.execute("ALTER TABLE configs DROP COLUMN model_seed")
    db.execute("CREATE VIEW measured_layers AS SELECT l.*, c.opt_level FROM layers l JOIN configs c "
               "ON c.config_id = l.config_id WHERE c.status = 'ok'")
    db.execute("CREATE VIEW interference AS SELECT c.config_id, c.model FROM configs c WHERE c.corun != ''")
    db.execute("UPDATE schema_version SET version = 2")
    db.commit()
    db.close()
    with Store.open(path, writable=False) as store:  # read in a copy brought up to date, the file left as it is
        assert store.db.execute("SELECT model_seed FROM configs").fetchall() == [(0,)]
        assert "model_seed" in {r[1] for r in store.db.execute("PRAGMA table_info(interference)")}
    assert "model_seed" not in {r[1] for r in sqlite3.connect(path).execute("PRAGMA table_info(configs)")}
    with Store.open(path) as store:
        assert store.statuses() == {old.key(): "ok"}
        versions = [r[0] for r in store.db.execute("SELECT version FROM schema_version ORDER BY version")]
        assert versions == [2, 3] and store.db.execute("SELECT model_seed FROM configs").fetchall() == [(0,)]
        for view in ("measured_layers", "interference"):
            assert "model_seed" in {r[1] for r in store.db.execute(f"PRAGMA table_info({view})")}


def test_a_schema_1_store_is_migrated_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old = Config(model="m", backend="onnxruntime", batch=None, threads=1)
    with Store.open(path, create=True) as store:
        store.write(ConfigResult(old, Fingerprint.here(), "ok", None, "2026-01-01T00:00:00+00:00", 1.0, attempts=1))
    _downgrade_to_schema_1(path)
    new = Config(model="m", backend="tvm", batch=None, threads=1, target="llvm", tune=0)
    with Store.open(path) as store:
        assert store.statuses() == {old.key(): "ok"}
        assert store.write(ConfigResult(new, Fingerprint.here(), "ok", None, "2026-01-01T00:00:00+00:00", 1.0,
                                        attempts=1))
        versions = [r[0] for r in store.db.execute("SELECT version FROM schema_version ORDER BY version")]
        cols = {r[1] for r in store.db.execute("PRAGMA table_info(layers)")}
        rows = store.db.execute("SELECT backend, target, tune, model_seed FROM configs ORDER BY config_id").fetchall()
        views = {r[1] for r in store.db.execute("PRAGMA table_info(measured_layers)")} & \
            {r[1] for r in store.db.execute("PRAGMA table_info(interference)")}
    assert versions == [1, 2, SCHEMA_VERSION] == [1, 2, 3] and {"schedule", "tuning_state", "target"} <= cols
    assert rows == [("onnxruntime", None, None, 0), ("tvm", "llvm", 0, 0)]  # the old row: seed 0, as built
    assert "model_seed" in views  # the views made anew: they show the column the migration added


@needs_tvm
def test_the_timed_runs_are_bracketed_by_the_between_runs_hook(tmp_path: Path) -> None:
    from layerperf import backends
    from layerperf.collectors import Collectors

    os.environ.setdefault("TVM_NUM_THREADS", "1")
    seen: list[int] = []
    backend = backends.get("tvm")
    plan = RunPlan(warmup=1, runs=12, threads=1, latency=True, between_runs=seen.append)
    prof = backend.profile(save(two_matmuls(), tmp_path, "mm"), plan, backends.backend_options(backend, {}),
                           Collectors.make())
    assert len(prof.runs) == 12 and seen[0] == 0 and seen[-1] == 12 and seen == sorted(seen)


@needs_tvm
def test_collect_stores_tvm_rows_with_target_tuning_state_and_schedule(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    model, store = save(two_matmuls(), tmp_path, "mm"), tmp_path / "tvm.db"
    argv = ["collect", "--models", str(model), "--backend", "onnxruntime,tvm", "--store", str(store),
            "--runs", "3", "--warmup", "1"]
    assert main(argv) == 0
    assert "collected 2 configurations (2 ok, 0 failed" in capsys.readouterr().out
    db = sqlite3.connect(store)
    configs = db.execute("SELECT backend, target, tune FROM configs ORDER BY backend").fetchall()
    layers = db.execute("SELECT l.name, l.schedule, l.tuning_state, l.target FROM measured_layers l JOIN configs c "
                        "USING (config_id) WHERE c.backend = 'tvm'").fetchall()
    db.close()
    assert configs == [("onnxruntime", None, None), ("tvm", "llvm", 0)]
    assert layers and all(s == "default schedule" and t == "untuned" and '"kind": "llvm"' in g for _, s, t, g in layers)
    assert main(argv) == 0 and "2 already in the store" in capsys.readouterr().out


@needs_tvm
def test_a_target_that_cannot_run_here_is_refused_before_the_store_is_made(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "none.db"
    code = main(["collect", "--models", str(save(two_matmuls(), tmp_path, "mm")), "--backend", "tvm",
                 "--target", "llvm -mtriple=aarch64-linux-gnu", "--store", str(store)])
    err = capsys.readouterr().err
    assert code == 2 and "not available here" in err and "Traceback" not in err and not store.exists()
