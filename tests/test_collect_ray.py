"""`layerperf collect --ray local`: a local Ray instance, loopback only, no files outside its own temporary folder,
gives the same rows and features as a local run (measurements aside). Skipped where ray is not installed."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import onnx
import pytest

from layerperf.data.records import LayerRecord

from conftest import tiny_cnn

pytest.importorskip("ray", reason="the ray extra is not installed")

# the layer's features: what a run on any executor must give alike (not its times, nor when it was made)
FEATURES = ("layer_index", "name", "op_type", "domain", "provider", "parent", "in_shapes", "out_shapes", "in_dtypes",
            "out_dtypes", "real_in_shapes", "real_out_shapes", "flops", "int_ops", "bytes_read", "bytes_written",
            "param_bytes", "padded_flops", "backend", "backend_version", "options", "model_name", "model_sha256",
            "batch", "threads", "runs", "machine_cpu", "machine_cores", "layerperf_version", "calls")
CONFIG = ("config_key", "model", "backend", "batch", "threads", "opt_level", "inter_op", "status", "reason", "layers")


def _collect(store: Path, home: Path, *extra: str, models: list[Path]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "TMPDIR": str(home / "tmp")}
    return subprocess.run([sys.executable, "-m", "layerperf", "collect", "--models", ",".join(map(str, models)),
                           "--threads", "1,2", "--runs", "2", "--warmup", "1", "--store", str(store), *extra],
                          capture_output=True, text=True, timeout=600, env=env)


def _table(store: Path, sql: str) -> list[tuple]:
    db = sqlite3.connect(store)
    try:
        return sorted(db.execute(sql).fetchall(), key=repr)
    finally:
        db.close()


def test_a_local_ray_run_equals_a_local_run_in_rows_and_features(tmp_path: Path) -> None:
    assert set(FEATURES) <= {f for f in LayerRecord.__dataclass_fields__}
    model, broken = tmp_path / "tiny.onnx", tmp_path / "broken.onnx"
    onnx.save(tiny_cnn(), model)
    broken.write_bytes(b"not a model")
    # a short home: Ray's socket paths under its temporary folder must fit 107 bytes
    home = Path(tempfile.mkdtemp(prefix="lpt-", dir="/tmp"))
    (home / "tmp").mkdir()
    try:
        _compare(tmp_path, home, model, broken)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _compare(tmp_path: Path, home: Path, model: Path, broken: Path) -> None:
    here = _collect(tmp_path / "here.db", home, models=[model, broken])
    assert here.returncode == 0, here.stderr
    on_ray = _collect(tmp_path / "ray.db", home, "--ray", "local", models=[model, broken])
    assert on_ray.returncode == 0, on_ray.stderr
    assert "collected 4 configurations (2 ok, 2 failed" in on_ray.stdout  # flags follow on a loaded host
    configs = f"SELECT {', '.join(CONFIG)} FROM configs"
    assert _table(tmp_path / "ray.db", configs) == _table(tmp_path / "here.db", configs)
    layers = (f"SELECT c.config_key, {', '.join('l.' + f for f in FEATURES)} "
              "FROM layers l JOIN configs c USING (config_id)")
    assert _table(tmp_path / "ray.db", layers) == _table(tmp_path / "here.db", layers)
    workers = {w for (w,) in _table(tmp_path / "ray.db", "SELECT worker FROM configs")}
    assert workers and all(w.startswith("ray:") for w in workers)
    # token auth off (no ~/.ray/auth_token), session files in a folder of its own, removed (not /tmp/ray)
    assert not (home / ".ray").exists()
    assert not [p for p in (home / "tmp").iterdir() if p.name.startswith("lp-ray-") or p.name == "ray"]
