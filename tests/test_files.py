"""Files layerperf writes get a plain open()'s mode; an ONNX model is not taken for a trace."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import onnx
import pytest

import layerperf
from layerperf.util import atomic

from conftest import run_cli, tiny_cnn


@pytest.fixture(params=[(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)], ids=["022", "077", "002"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    """Set the process umask for one test; yields the mode a new file should get."""
    mask, mode = request.param
    old = os.umask(mask)
    try:
        yield mode
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(scope="module")
def memory_profile(tiny_model_path: Path) -> layerperf.Profile:
    return layerperf.profile(str(tiny_model_path), runs=1, warmup=0, latency=False, memory=True)


def test_profile_outputs_follow_umask(memory_profile: layerperf.Profile, tmp_path: Path, umask: int) -> None:
    written = layerperf.save(memory_profile, tmp_path / "out")
    assert {"trace.json", "layers.csv", "memory_flow.svg", "memory_timeline.svg"} <= set(written)
    assert {name: _mode(path) for name, path in written.items()} == {name: umask for name in written}
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(written)  # no temporaries left


def test_cached_model_follows_umask(tmp_path: Path, umask: int) -> None:
    from layerperf.models.zoo._cache import write_atomic

    target = tmp_path / "cache" / "m.onnx"
    write_atomic(target, b"model")
    assert target.read_bytes() == b"model" and _mode(target) == umask


def test_failed_write_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), atomic.files(tmp_path, ["a.txt", "b.txt"]) as (a, _b):
        a.write(b"partial")
        raise RuntimeError("writer failed")
    assert list(tmp_path.iterdir()) == []


def test_replaces_existing_file(tmp_path: Path) -> None:
    target = tmp_path / "x.json"
    target.write_text("old")
    atomic.write_bytes(target, b"new")
    assert target.read_bytes() == b"new" and [p.name for p in tmp_path.iterdir()] == ["x.json"]


# -- layerperf analyze on a model -------------------------------------------------------------------

@pytest.mark.parametrize("name", ["model.onnx", "model.bin"])
def test_analyze_an_onnx_model(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    onnx.save(tiny_cnn(), path)
    proc = run_cli("analyze", str(path))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "is an ONNX model, not a trace" in lines[0] and f"layerperf profile {path}" in lines[0]
