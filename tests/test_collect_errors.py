"""`layerperf collect`'s bad input: one line, exit 2, nothing written or lost; a store from another machine told;
the store as Parquet."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import onnx
import pytest

from layerperf.cli import main

from conftest import altered_copy, from_another_machine, tiny_cnn

FAST = ["--runs", "2", "--warmup", "1"]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("collect-err") / "tiny.onnx"
    onnx.save(tiny_cnn(), path)
    return path


@pytest.fixture(scope="module")
def collected(model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("collected") / "s.db"
    assert main(["collect", "--models", str(model), "--threads", "1,2", "--store", str(store), *FAST]) == 0
    return store


def one_line_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["collect", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("layerperf: error: ") and "\n" not in err and "Traceback" not in err
    return err


@pytest.mark.parametrize(("args", "words"), [
    (["--models", ""], "nothing to collect"),
    (["--models", "no-such-model"], "unknown model 'no-such-model'"),
    (["--models", "MODEL", "--backend", "nope"], "unknown backend 'nope'"),
    (["--models", "MODEL", "--threads", "one"], "--threads: 'one' is not an integer"),
    (["--models", "MODEL", "--batch", "0"], "--batch: '0' is not an integer of 1 or more"),
    (["--models", "MODEL", "--cpus", "0-x"], "malformed CPU list"),
    (["--models", "MODEL", "--cpus", "4096"], "is not among those this process may run on"),
    (["--models", "MODEL", "--corun", "MatMul"], "co-runner 'MatMul' gives no inputs"),
    (["--models", "MODEL", "--inter-op", "seq,x"], "--inter-op: 'x' is not an integer"),
    (["--models", "MODEL", "--opt-level", "all,turbo"], "unknown --opt-level 'turbo'"),
    (["--models", "MODEL", "--inter-op", ""], "--inter-op: '' is not an integer"),
    (["--models", "MODEL", "--backend", ""], "--backend names no backend"),
    (["--models", "MODEL", "--threads", "1,500"], "--threads 500 is more than"),
    (["--models", "MODEL", "--inter-op", "seq,"], "--inter-op: '' is not an integer"),
    (["--models", "MODEL", "--corun", "Foo:A=1"], "unknown operator 'Foo'"),
    (["--models", "MODEL", "--corun", "MatMul:A=4x4"], "MatMul needs input B"),
])
def test_a_sweep_that_cannot_run_is_refused_before_the_store_is_made(
        model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], words: str) -> None:
    store = tmp_path / "never.db"
    args = [str(model) if a == "MODEL" else a for a in args]
    assert words in one_line_error(capsys, *args, "--store", str(store))
    assert not store.exists()


def test_a_store_under_a_file_is_one_line(model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    err = one_line_error(capsys, "--models", str(model), "--store", str(blocker / "s.db"), *FAST)
    assert f"cannot make the store {blocker / 's.db'}" in err and blocker.read_text() == "not a folder"


def test_a_ray_cluster_where_nothing_answers_is_refused_before_the_store(model: Path, tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("ray", reason="the ray extra is not installed")
    import socket

    with socket.socket() as closed:  # a port nobody listens on: bound, never listened to
        closed.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{closed.getsockname()[1]}"
        store = tmp_path / "never.db"
        err = one_line_error(capsys, "--models", str(model), "--ray", address, "--store", str(store), *FAST)
    assert f"cannot join the Ray cluster at {address}: nothing answers there" in err and not store.exists()


def test_a_sweep_already_in_the_store_needs_no_cluster(collected: Path, model: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("ray", reason="the ray extra is not installed")
    import socket

    store = tmp_path / "done.db"
    store.write_bytes(collected.read_bytes())
    with socket.socket() as closed:  # the cluster is gone: nothing left to measure, so nothing to join
        closed.bind(("127.0.0.1", 0))
        args = ["collect", "--models", str(model), "--threads", "1,2", "--store", str(store), *FAST,
                "--ray", f"127.0.0.1:{closed.getsockname()[1]}"]
        assert main(args) == 0
    assert "collected 0 configurations (0 ok, 0 failed); 2 already in the store" in capsys.readouterr().out


def test_only_a_host_and_port_are_probed() -> None:
    pytest.importorskip("ray", reason="the ray extra is not installed")
    import socket

    from layerperf.dataset.ray_runner import _reachable
    from layerperf.errors import InputError

    for address in ("auto", "::1", "ray://127.0.0.1:1", "head-node"):  # Ray's to read: not refused here
        _reachable(address)
    with socket.socket(socket.AF_INET6) as closed:
        try:
            closed.bind(("::1", 0))
        except OSError:
            pytest.skip("no IPv6 loopback here")
        with pytest.raises(InputError, match="nothing answers there"):
            _reachable(f"[::1]:{closed.getsockname()[1]}")


def test_nothing_to_do(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "nothing to do" in one_line_error(capsys, "--store", str(tmp_path / "s.db"))


def _foreign(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE t (x)")
    db.commit()
    db.close()


def _newer(path: Path, source: Path) -> None:
    altered_copy(source, path, "UPDATE schema_version SET version = 99")


def _earlier_build(path: Path, source: Path) -> None:
    altered_copy(source, path, "ALTER TABLE configs RENAME COLUMN worker TO then_unnamed")


@pytest.mark.parametrize(("make", "words"), [
    (lambda p, s: p.write_bytes(b"not a database, just bytes " * 100), "is not a layerperf store"),
    (_earlier_build, "its configs table has no column worker (written by an earlier build"),
    (lambda p, s: _foreign(p), "an SQLite database but not a layerperf store"),
    (_newer, "was written by a newer layerperf (store schema 99"),
    (lambda p, s: p.mkdir(), "is a directory, not a store"),
])
def test_a_bad_store_is_refused_and_left_as_it_was(model: Path, collected: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str], make, words: str) -> None:
    store = tmp_path / "bad.db"
    make(store, collected)
    before = store.read_bytes() if store.is_file() else None
    assert words in one_line_error(capsys, "--models", str(model), "--store", str(store), *FAST)
    assert (store.read_bytes() if store.is_file() else None) == before
    assert words in one_line_error(capsys, "--store", str(store), "--export", str(tmp_path / "out"))


def test_a_damaged_store_is_refused(collected: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "cut.db"
    data = collected.read_bytes()
    store.write_bytes(data[:len(data) // 2] + b"\0" * 4096 + data[len(data) // 2 + 4096:])
    err = one_line_error(capsys, "--store", str(store), "--export", str(tmp_path / "out"))
    assert "damaged" in err or "not a layerperf store" in err


def test_export_of_a_missing_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "no store at" in one_line_error(capsys, "--store", str(tmp_path / "none.db"), "--export", str(tmp_path))
    assert not (tmp_path / "none.db").exists()


@pytest.mark.parametrize("under", [False, True])
def test_an_export_a_file_stands_in_the_way_of_is_refused_before_the_sweep(
        model: Path, collected: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], under: bool) -> None:
    # it measured the whole sweep, wrote the store, then refused (or, under a file, a traceback)
    blocker = tmp_path / "afile"
    blocker.write_text("not a folder")
    target = blocker / "sub" if under else blocker
    store = tmp_path / "new.db"
    err = one_line_error(capsys, "--models", str(model), "--store", str(store), "--export", str(target), *FAST)
    assert "is a file, not a directory" in err and not store.exists()
    err = one_line_error(capsys, "--store", str(collected), "--export", str(target))
    assert "is a file, not a directory" in err and blocker.read_text() == "not a folder"


@pytest.mark.parametrize(("address", "says"), [("", "--ray names no address"), (" ", "--ray names no address"),
                                               (":", "--ray ':' is no address"), ("h:99999", "is no address")])
def test_a_malformed_ray_address_is_refused_before_the_store(model: Path, tmp_path: Path, address: str, says: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    # "" made the store, then failed; ":" printed Ray's own logged traceback before the line
    store = tmp_path / "r.db"
    err = one_line_error(capsys, "--models", str(model), "--ray", address, "--store", str(store), *FAST)
    assert says in err and not store.exists()


def test_a_store_of_another_machine_is_told_with_both_fingerprints(model: Path, collected: Path, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    store = from_another_machine(collected, tmp_path / "other.db")
    assert main(["collect", "--models", str(model), "--threads", "1", "--store", str(store), *FAST]) == 0
    err = capsys.readouterr().err
    assert "another machine" in err and "Some Other CPU 9000, 96 cores" in err and "here:" in err


def test_without_ray_installed_one_line_says_how(model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    store = tmp_path / "r.db"
    err = one_line_error(capsys, "--models", str(model), "--ray", "local", "--store", str(store))
    assert "Ray (ray) is not installed" in err and "pip install 'layerperf[ray]'" in err and not store.exists()


def test_export_without_a_parquet_writer_says_how(collected: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "duckdb", None)
    err = one_line_error(capsys, "--store", str(collected), "--export", str(tmp_path / "pq"))
    assert "pip install 'layerperf[parquet]'" in err and not (tmp_path / "pq").exists()


def test_export_writes_every_table_as_parquet(collected: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    pq = pytest.importorskip("pyarrow.parquet", reason="the parquet extra (pyarrow) is not installed")
    out = tmp_path / "pq"
    assert main(["collect", "--store", str(collected), "--export", str(out)]) == 0
    db = sqlite3.connect(collected)
    for table in ("machines", "configs", "layers"):
        got = pq.read_table(out / f"{table}.parquet")
        cols = [r[1] for r in db.execute(f"PRAGMA table_info({table})")]
        assert got.column_names == cols
        assert got.num_rows == db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    medians = pq.read_table(out / "layers.parquet").column("median_us").to_pylist()
    assert medians == [r[0] for r in db.execute("SELECT median_us FROM layers")]
    db.close()
    assert sorted(p.name for p in out.iterdir()) == ["configs.parquet", "layers.parquet", "machines.parquet"]


def test_a_model_file_changed_since_it_was_measured_is_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a configuration is keyed by the file's path: another model copied over it was skipped without a word
    path, store = tmp_path / "m.onnx", tmp_path / "s.db"
    onnx.save(tiny_cnn(), path)
    argv = ["collect", "--models", str(path), "--threads", "1", "--store", str(store), *FAST]
    assert main(argv) == 0
    capsys.readouterr()
    assert main(argv) == 0
    assert "changed since" not in capsys.readouterr().err  # the same file: skipped quietly
    changed = tiny_cnn()
    changed.doc_string = "another model at the same path"
    onnx.save(changed, path)
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert f"{path} changed since the store measured it" in err and "skipped as measured" in err


@pytest.mark.parametrize("runs", ["0", "-3"])
def test_runs_below_one_are_refused_with_the_rule_they_break(runs: str, capsys: pytest.CaptureFixture[str]) -> None:
    # "-3" said "expected 0 or more", and 0 was then refused as "must be 1 or more"
    with pytest.raises(SystemExit) as exc:
        main(["collect", "--models", "lstm", "--runs", runs, "--store", "s.db"])
    assert exc.value.code == 2 and f"argument --runs: expected 1 or more, got {runs}" in capsys.readouterr().err
