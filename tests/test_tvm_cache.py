"""Compiled models cached on disk: a second build of the same model, target, pipeline and tuning state
loads instead of compiling; anything that changes the code makes a new entry; no entry is partial."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("tvm")
os.environ.setdefault("TVM_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from layerperf.backends.tvm import cache  # noqa: E402
from layerperf.backends.tvm.build import build, database_digest  # noqa: E402
from layerperf.backends.tvm.calls import CallMap  # noqa: E402
from layerperf.backends.tvm.instrument import Runner  # noqa: E402
from tvm_models import feed  # noqa: E402

from conftest import tiny_cnn  # noqa: E402


def _output(b: object) -> np.ndarray:
    model = tiny_cnn()
    runner = Runner(b.executable, b.device, [feed(model)["input"]], b.cmap)  # type: ignore[attr-defined]
    return runner.plain().numpy()


def test_a_second_build_loads_from_the_cache(tmp_path: Path) -> None:
    model = tiny_cnn()
    first = build(model, cache_root=tmp_path)
    second = build(model, cache_root=tmp_path)
    assert not first.from_cache and second.from_cache
    assert second.cmap == first.cmap and second.info == first.info
    assert [c.func for c in second.main.calls] == [c.func for c in first.main.calls]
    np.testing.assert_array_equal(_output(first), _output(second))


def test_the_cache_lives_under_layerperf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAYERPERF_CACHE", str(tmp_path))
    b = build(tiny_cnn())
    assert cache.tvm_cache_dir() == tmp_path / "tvm"
    assert (cache.entry_dir(b.info.key) / cache.INFO_FILE).is_file()


def test_what_changes_the_code_changes_the_key(tmp_path: Path) -> None:
    model = tiny_cnn()
    base = build(model, cache_root=tmp_path).info.key
    keys = {base.hexdigest(),
            build(model, pipeline="unfused", cache_root=tmp_path).info.key.hexdigest(),
            build(model, target="llvm -num-cores=3", cache_root=tmp_path).info.key.hexdigest(),
            build(tiny_cnn(batch=2), cache_root=tmp_path).info.key.hexdigest()}
    assert len(keys) == 4
    assert len(list((tmp_path / "builds").iterdir())) == 4


def test_a_damaged_entry_is_built_again(tmp_path: Path) -> None:
    model = tiny_cnn()
    b = build(model, cache_root=tmp_path)
    (cache.entry_dir(b.info.key, tmp_path) / cache.INFO_FILE).write_text("{not json")
    again = build(model, cache_root=tmp_path)
    assert not again.from_cache and build(model, cache_root=tmp_path).from_cache


def test_a_failed_export_leaves_no_entry(tmp_path: Path) -> None:
    key = cache.BuildKey("m", "t", "default", cache.UNTUNED, "v")
    info = cache.BuildInfo(key, 1.0, "default schedule", "now")

    def export(path: str) -> None:
        Path(path).write_bytes(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError):
        cache.store(info, CallMap((), ()), export, tmp_path)
    assert cache.lookup(key, tmp_path) is None
    assert not [p for p in cache.entry_dir(key, tmp_path).iterdir()]


def test_the_tuning_state_is_the_databases_digest(tmp_path: Path) -> None:
    assert database_digest(None) == cache.UNTUNED
    assert database_digest(tmp_path) == cache.UNTUNED  # no database there yet
    (tmp_path / "database_workload.json").write_text('["w"]\n')
    (tmp_path / "database_tuning_record.json").write_text("")
    assert database_digest(tmp_path) == cache.UNTUNED  # no record yet
    (tmp_path / "database_tuning_record.json").write_text('[0, "r1"]\n')
    one = database_digest(tmp_path)
    with (tmp_path / "database_tuning_record.json").open("a") as f:
        f.write('[0, "r2"]\n')
    assert one.startswith("ms-") and database_digest(tmp_path) not in (one, cache.UNTUNED)
