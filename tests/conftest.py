"""Shared fixtures; and the suite's own cache directory, set before anything imports layerperf.

The suite never reads or writes the user's ``~/.cache/layerperf``: what the user calibrated, built or
remembered there must not change a test's outcome, and tests must not leave files there. Every test,
and every ``layerperf`` subprocess a test starts (they inherit the environment), uses a cache of the
session's own: a fresh temporary directory, removed at the end, in which the zoo models are built once
per session; or ``$LAYERPERF_TEST_CACHE``, a directory kept for the suite alone, to keep built models
between sessions.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from browser import Browser, require_binaries

# conftest is imported before any test module, so before anything imports layerperf
KEPT_CACHE = os.environ.get("LAYERPERF_TEST_CACHE")
CACHE = Path(KEPT_CACHE) if KEPT_CACHE else Path(tempfile.mkdtemp(prefix="layerperf-test-cache-"))
os.environ["LAYERPERF_CACHE"] = str(CACHE)
if not KEPT_CACHE:
    atexit.register(shutil.rmtree, CACHE, ignore_errors=True)


def tiny_cnn(batch: int | str = 1) -> onnx.ModelProto:
    """Conv -> Relu -> MaxPool -> Flatten -> Gemm, small enough to profile in milliseconds."""
    rng = np.random.default_rng(0)
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, 16, 16])
    y = helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 10])
    inits = [
        numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "conv.w"),
        numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "conv.b"),
        numpy_helper.from_array(rng.standard_normal((10, 8 * 8 * 8)).astype(np.float32), "fc.w"),
        numpy_helper.from_array(rng.standard_normal(10).astype(np.float32), "fc.b"),
    ]
    nodes = [
        helper.make_node("Conv", ["input", "conv.w", "conv.b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc.w", "fc.b"], ["logits"], name="fc", transB=1),
    ]
    graph = helper.make_graph(nodes, "tiny_cnn", [x], [y], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def altered_copy(store: Path, path: Path, sql: str) -> Path:
    """A copy of the store ``store`` at ``path``, ``sql`` run on it."""
    path.write_bytes(store.read_bytes())
    db = sqlite3.connect(path)
    db.execute(sql)
    db.commit()
    db.close()
    return path


def from_another_machine(store: Path, path: Path) -> Path:
    """A copy of the store ``store`` at ``path`` whose measurements say they ran on other hardware."""
    return altered_copy(store, path, "UPDATE machines SET cpu = 'Some Other CPU 9000', cores = 96")


@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("models") / "tiny_cnn.onnx"
    onnx.save(tiny_cnn(), path)
    return path


@pytest.fixture(scope="session")
def dynamic_model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("models") / "tiny_dynamic.onnx"
    onnx.save(tiny_cnn(batch="N"), path)
    return path


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real command line in a subprocess, as a user would."""
    return subprocess.run([sys.executable, "-m", "layerperf", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=600)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One headless Chromium for a whole test module (a start costs ~1 s); each test loads its page afresh."""
    with Browser(*require_binaries()) as started:
        yield started


@pytest.fixture(scope="module")
def artifacts() -> Path:
    """Where screenshots go: $LAYERPERF_ARTIFACTS, else out/test-artifacts in the checkout (gitignored)."""
    path = Path(os.environ.get("LAYERPERF_ARTIFACTS") or Path(__file__).resolve().parent.parent / "out"
                / "test-artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path
