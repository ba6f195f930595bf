"""`layerperf predict`: the predictor trained on a store, evaluated leave-one-model-out on a synthetic store
whose times follow known rates, a model it never saw predicted from a tiny collected store (an op type the
store lacks by the roofline, flagged), the JSON keys, and bad input in one line."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sqlite3
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from layerperf.calibration import peaks as calibration
from layerperf.calibration.peaks import Peaks
from layerperf.cli import main
from layerperf.data.machine import fingerprint
from layerperf.dataset.predict import training
from layerperf.dataset.predict.evaluate import leave_one_model_out
from layerperf.dataset.predict.fallback import category
from layerperf.dataset.predict.features import FEATURES, Op, RunFactors, feature_row
from layerperf.dataset.predict.model import (
    FEW_ROWS,
    FEW_ROWS_WIDE,
    LEARNED,
    ROOFLINE,
    STORE_ROOFLINE,
    STORE_WIDE,
    UNKNOWN,
    Predictor,
)
from layerperf.dataset.schema import MIGRATIONS
from predict_store import MODELS, write_store

from conftest import altered_copy, from_another_machine, tiny_cnn

sklearn = pytest.importorskip("sklearn", reason="the predict extra (scikit-learn) is not installed")


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_store(tmp_path_factory.mktemp("predict") / "synthetic.db")


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three models: enough for the command's leave-one-model-out, quicker than five."""
    models = {m: MODELS[m] for m in ("synth-a", "synth-b", "synth-c")}
    return write_store(tmp_path_factory.mktemp("predict-small") / "small.db", models)


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LAYERPERF_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _calibrate() -> None:
    """A calibration of this machine (made-up peaks: the roofline needs some)."""
    fp = fingerprint()
    calibration.save(Peaks(cpu_model=str(fp["cpu"]), cores=int(fp["cores"] or 1), flops_per_s={1: 2e10, 2: 4e10},
                           bytes_per_s={1: 1e10, 2: 1.5e10}))


def test_features_are_numbers_nan_where_unknown() -> None:
    op = Op("c", "Conv", "", "1x8x16x16;8x8x3x3;8", "1x8x16x16", "float32;float32;float32", "float32", 2 * 8 * 8 * 9 *
            256, None, 9000, 8192, 2336, None)
    row = feature_row(op, RunFactors("onnxruntime", None, 2))
    assert len(row) == len(FEATURES)
    named = dict(zip(FEATURES, row, strict=True))
    assert named["in1_window"] == 9 and named["in0_dim1"] == 8 and named["threads"] == 2
    assert math.isnan(named["batch"]) and math.isnan(named["log2_int_ops"]) and math.isnan(named["padded_ratio"])
    assert named["log2_in0_first"] == 1.0  # log2(1 + the leading dimension, 1)
    lstm = Op("l", "LSTM", "", "128x8x256;1x2048x256;1x2048x512;1x4096", "128x1x8x512", "float32", "float32",
              10**9, None, 10**6, 10**6, 6 * 10**6, None)
    steps = dict(zip(FEATURES, feature_row(lstm, RunFactors("onnxruntime", 8, 1)), strict=True))
    assert steps["log2_in0_first"] == math.log2(129) and steps["in0_dim1"] == 8  # a recurrent layer's steps
    assert steps["log2_hidden_over_input"] == 1.0  # R 2048x512 over W 2048x256: hidden 512 over input 256
    assert math.isnan(named["log2_hidden_over_input"])  # a convolution's third input is its bias: no such ratio


def test_leave_one_model_out_on_known_rates(synthetic: Path) -> None:
    ev = leave_one_model_out(training.read(synthetic))
    assert ev.overall.pairs == 5 * 4 and set(ev.per_model) == {"synth-a", "synth-b", "synth-c", "synth-d", "synth-e"}
    # the rates are the same in every model: a model left out is predicted from the others
    assert ev.overall.within_10pct is not None and ev.overall.within_10pct >= 0.9
    assert ev.overall.rmspe is not None and ev.overall.rmspe < 0.1
    assert all(p.layers == "store" and not p.unseen for p in ev.pairs)


def test_without_a_store_learned_fallback_an_unseen_op_type_takes_the_roofline_or_is_unknown(synthetic: Path) -> None:
    data = training.read(synthetic)
    softmax = Op("sm", "Softmax", "", "1x1000", "1x1000", "float32", "float32", 5000, None, 4000, 4000, 0, None)
    conv = data.configs[0].ops[0]
    run = data.configs[0].factors
    peaks = Peaks("cpu", 2, flops_per_s={1: 2e10}, bytes_per_s={1: 1e10})
    with_peaks = Predictor.fit(data.configs, peaks, fallback=None).predict([conv, softmax], run)
    assert [p.how for p in with_peaks.layers] == [LEARNED, ROOFLINE]
    assert with_peaks.layers[1].flagged and with_peaks.unseen_op_types == ["Softmax"]
    assert with_peaks.latency_us is not None and with_peaks.layers[1].us is not None and with_peaks.layers[1].us > 0
    without = Predictor.fit(data.configs, None, fallback=None).predict([conv, softmax], run)
    assert without.layers[1].how == UNKNOWN and without.layers[1].us is None
    assert without.latency_us is None and without.between_us is None and without.known_layers_us > 0


@pytest.mark.parametrize("fallback", [STORE_WIDE, STORE_ROOFLINE])
def test_without_a_calibration_an_op_type_never_seen_is_estimated_from_the_store(synthetic: Path,
                                                                                 fallback: str) -> None:
    data = training.read(synthetic)
    softmax = Op("sm", "Softmax", "", "1x1000", "1x1000", "float32", "float32", 5000, None, 4000, 4000, 0, None)
    conv, run = data.configs[0].ops[0], data.configs[0].factors
    pred = Predictor.fit(data.configs, None, fallback).predict([conv, softmax], run)
    assert [p.how for p in pred.layers] == [LEARNED, fallback]
    assert pred.layers[1].flagged and pred.unseen_op_types == ["Softmax"]
    us = pred.layers[1].us
    assert us is not None and math.isfinite(us) and us > 0
    assert pred.latency_us is not None and math.isfinite(pred.latency_us) and pred.latency_us > pred.known_layers_us
    # the store-learned estimate comes before a calibration's roofline (it came closer on the zoo's layers)
    peaks = Peaks("cpu", 2, flops_per_s={1: 2e10}, bytes_per_s={1: 1e10})
    assert Predictor.fit(data.configs, peaks, fallback).predict([softmax], run).layers[0].how == fallback


def test_a_layer_with_neither_work_nor_bytes_stays_unknown(synthetic: Path) -> None:
    data = training.read(synthetic)
    shape = Op("s", "Shape", "", "1x8", "2", "float32", "int64", None, None, None, None, 0, None)
    pred = Predictor.fit(data.configs, None).predict([data.configs[0].ops[0], shape], data.configs[0].factors)
    assert pred.layers[1].how == UNKNOWN and pred.layers[1].us is None and pred.latency_us is None


def test_an_op_type_with_few_rows_takes_the_store_wide_estimate_unflagged(synthetic: Path) -> None:
    """The synthetic store's Gemm has 20 rows (one per configuration), too few for a regressor of its own."""
    data = training.read(synthetic)
    cfg = data.configs[0]
    gemm = [op for op in cfg.ops if op.op_type == "Gemm"]
    pred = Predictor.fit(data.configs, None).predict(gemm, cfg.factors)
    assert [p.how for p in pred.layers] == [FEW_ROWS_WIDE] and not pred.layers[0].flagged
    assert pred.unseen_op_types == [] and pred.layers[0].us is not None and pred.layers[0].us > 0
    assert Predictor.fit(data.configs, None, fallback=None).predict(gemm, cfg.factors).layers[0].how == FEW_ROWS


def _renamed(cfg: training.MeasuredConfig, old: str, new: str) -> training.MeasuredConfig:
    ops = tuple(dataclasses.replace(op, op_type=new) if op.op_type == old else op for op in cfg.ops)
    return dataclasses.replace(cfg, ops=ops)


def test_leave_one_model_out_with_an_op_type_only_the_held_out_model_has(synthetic: Path) -> None:
    """synth-a's Relus renamed LeakyRelu: left out, its LeakyRelus are an op type no other model has. The
    store-wide regressor, told that both are elementwise, predicts them near the Relus' rate; without a
    fallback (or a calibration) synth-a's latency is unknown."""
    data = training.read(synthetic)
    configs = tuple(_renamed(c, "Relu", "LeakyRelu") if c.model == "synth-a" else c for c in data.configs)
    renamed = training.StoreData(data.source, configs, data.fingerprints)
    assert category("LeakyRelu") == category("Relu") == "elementwise"
    ev = leave_one_model_out(renamed)
    held = [p for p in ev.pairs if p.model == "synth-a"]
    assert len(held) == 4 and all(p.unseen == ("LeakyRelu",) for p in held)
    assert all(p.predicted_us is not None and p.error is not None and abs(p.error) < 0.25 for p in held)
    without = leave_one_model_out(renamed, fallback=None)
    assert all(p.predicted_us is None for p in without.pairs if p.model == "synth-a")
    assert without.per_model["synth-a"].within_10pct == 0.0


def test_evaluate_json_keys(small: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["predict", "--store", str(small), "--evaluate", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert 0.9 <= doc["within_10pct"] <= 1 and 0 <= doc["rmspe"] < 0.1
    assert {"pairs", "mean_abs_error", "per_model", "configurations", "clean", "layers_sum"} <= set(doc)
    assert set(doc["per_model"]) == {"synth-a", "synth-b", "synth-c"}
    assert set(doc["per_model"]["synth-a"]) == {"pairs", "within_10pct", "rmspe", "mean_abs_error"}
    pair = doc["configurations"][0]
    assert {"model", "configuration", "predicted_us", "measured_us", "error", "layers", "unseen_op_types",
            "runs_slowed", "runs_disturbed", "flagged"} <= set(pair)


def test_evaluate_table(small: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["predict", "--store", str(small), "--evaluate"]) == 0
    out = capsys.readouterr().out
    assert "synth-c b4 t2" in out and "within ±10%" in out and "RMSPE" in out


def _unseen_model() -> onnx.ModelProto:
    """tiny_cnn with a Softsign after its Relu: an op type no collected tiny_cnn has."""
    model = tiny_cnn()
    nodes = list(model.graph.node)
    nodes[1].output[0] = "r0"
    nodes.insert(2, helper.make_node("Softsign", ["r0"], ["r"], name="softsign"))
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    model.graph.output[0].type.tensor_type.elem_type = TensorProto.FLOAT
    return model


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A store of tiny_cnn collected for real (one configuration), and a model it never saw."""
    root = tmp_path_factory.mktemp("predict-collected")
    model, unseen, store = root / "tiny.onnx", root / "unseen.onnx", root / "tiny.db"
    onnx.save(tiny_cnn(), model)
    onnx.save(_unseen_model(), unseen)
    assert main(["collect", "--models", str(model), "--store", str(store), "--runs", "3", "--warmup", "1"]) == 0
    return store, unseen


def test_an_unseen_model_with_an_op_type_never_seen(collected: tuple[Path, Path], cache: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    store, unseen = collected
    _calibrate()
    assert main(["predict", str(unseen), "--store", str(store), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    hows = {layer["op_type"]: layer["how"] for layer in doc["layers"]}
    assert hows["Softsign"] == "roofline" and doc["unseen_op_types"] == ["Softsign"]
    assert "median rate" in hows.values()  # the store's op types, from its few rows
    assert all(layer["held"] in (True, False) for layer in doc["layers"])  # whether the ceiling held it
    assert doc["latency_us"] > 0 and doc["layers_us"] > 0 and doc["between_us"] is not None
    assert {"model", "batch", "threads", "opt_level", "known_layers_us", "store", "calibration"} <= set(doc)
    assert main(["predict", str(unseen), "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert "softsign" in out and "roofline (op type not in the store)" in out and "end to end" in out
    # its batch is fixed (1): collect stored it without a batch, and that is what it is predicted at
    assert doc["batch"] is None and "batch -, 1 thread," in out
    assert main(["predict", str(unseen), "--store", str(store), "--batch", "1", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["latency_us"] == doc["latency_us"]
    err = one_line_error(capsys, str(unseen), "--store", str(store), "--batch", "8")
    assert "--batch 8: " in err and "runs at batch 1 only (its input input has a fixed leading dimension)" in err


def test_without_a_calibration_an_unseen_op_type_is_unknown(collected: tuple[Path, Path], cache: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    store, unseen = collected
    assert main(["predict", str(unseen), "--store", str(store), "--format", "json"]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["latency_us"] is None and doc["layers_us"] is None and doc["known_layers_us"] > 0
    assert [la["predicted_us"] for la in doc["layers"] if la["op_type"] == "Softsign"] == [None]
    assert main(["predict", str(unseen), "--store", str(store)]) == 0
    assert "no calibration for a roofline: Softsign" in capsys.readouterr().out


def one_line_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["predict", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("layerperf: error: ") and "\n" not in err and "Traceback" not in err
    return err


def test_bad_stores(tmp_path: Path, synthetic: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "no store at" in one_line_error(capsys, "--store", str(tmp_path / "none.db"), "--evaluate")
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database " * 100)
    assert "is not a layerperf store" in one_line_error(capsys, "--store", str(garbage), "--evaluate")
    empty = tmp_path / "empty.db"
    write_store(empty, {})
    assert "holds no measured configuration" in one_line_error(capsys, "--store", str(empty), "--evaluate")
    one = tmp_path / "one.db"
    write_store(one, {"synth-a": [8, 16]})
    assert "needs two models or more" in one_line_error(capsys, "--store", str(one), "--evaluate")
    assert "nothing to predict" in one_line_error(capsys, "--store", str(synthetic))
    assert "not both" in one_line_error(capsys, "resnet18", "--store", str(synthetic), "--evaluate")
    twice = one_line_error(capsys, "--store", str(synthetic), "--store", str(synthetic.parent / "." / synthetic.name),
                           "--evaluate")
    assert "a store is given twice" in twice
    assert "is not among those" in one_line_error(capsys, "synth.onnx", "--store", str(synthetic), "--cpus", "4096")
    assert "unknown operator 'Foo'" in one_line_error(capsys, "synth.onnx", "--store", str(synthetic), "--corun",
                                                      "Foo:A=1")
    assert not (tmp_path / "none.db").exists()


def test_a_model_whose_op_types_were_never_seen(tmp_path: Path, cache: Path, synthetic: Path,
                                                collected: tuple[Path, Path],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "softsign.onnx"
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])
    graph = helper.make_graph([helper.make_node("Softsign", ["x"], ["y"], name="s")], "softsign", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9), model)
    # a store of some size: the regressor over its every op type estimates it, flagged
    assert main(["predict", str(model), "--store", str(synthetic), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [la["how"] for la in doc["layers"]] == ["store-wide"] and doc["unseen_op_types"] == ["Softsign"]
    assert doc["latency_us"] > 0 and doc["calibration"] is False
    assert main(["predict", str(model), "--store", str(synthetic)]) == 0
    out = capsys.readouterr().out
    assert "store-wide (op type not in the store)" in out and "(store-wide): Softsign" in out
    # a store too small for it (one tiny_cnn configuration), no calibration: refused
    err = one_line_error(capsys, str(model), "--store", str(collected[0]))
    assert "op types is in the store" in err and "no calibration" in err


def test_a_store_of_another_machine_is_told(tmp_path: Path, small: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    other = from_another_machine(small, tmp_path / "other.db")
    assert main(["predict", "--store", str(other), "--evaluate", "--format", "json"]) == 0
    err = capsys.readouterr().err
    assert "holds measurements of another machine" in err
    assert "store:   Some Other CPU 9000, 96 cores" in err and "\n  here:    " in err


def test_without_scikit_learn_it_says_how_to_install(synthetic: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "sklearn.ensemble", None)
    err = one_line_error(capsys, "--store", str(synthetic), "--evaluate")
    assert "needs scikit-learn" in err and "pip install 'layerperf[predict]'" in err


def test_a_file_no_batch_changes_refuses_another(tmp_path: Path, synthetic: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "scalar.onnx"  # its only input has no leading dimension: collect stores it batchless
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "scalar", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9), model)
    err = one_line_error(capsys, str(model), "--store", str(synthetic), "--batch", "8")
    assert "runs at no other batch (its inputs have no leading dimension to size)" in err
    every = ",".join(map(str, sorted(os.sched_getaffinity(0))))  # the run on every CPU: none left beside it
    placed = one_line_error(capsys, str(model), "--store", str(synthetic), "--cpus", every, "--corun", "Relu:X=64x64")
    assert "no CPU is left for the co-runner" in placed


def test_a_store_collected_before_the_disturbed_counts(tmp_path: Path, small: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    old = tmp_path / "old.db"
    old.write_bytes(small.read_bytes())
    db = sqlite3.connect(old)
    db.execute("DROP VIEW measured_layers")
    db.execute("DROP VIEW interference")  # it names configs.model_seed (schema 3)
    for column in ("runs_disturbed", "disturbed_used"):
        db.execute(f"ALTER TABLE configs DROP COLUMN {column}")
    for table, column, _ in MIGRATIONS[2] + MIGRATIONS[3]:  # and before the TVM columns and seeds: schema 1
        db.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    db.execute("UPDATE schema_version SET version = 1")
    db.commit()
    db.execute("PRAGMA journal_mode = DELETE")
    db.close()
    before = old.read_bytes()
    data = training.read(old)
    assert len(data.configs) == 12 and all(c.runs_disturbed is None and not c.flagged for c in data.configs)
    assert main(["predict", "--store", str(old), "--evaluate", "--format", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["configurations"]) == 12
    # read in a copy brought up to date: the store itself is only collect's to change (no version row, no WAL)
    assert old.read_bytes() == before and not old.with_name("old.db-wal").exists()


def test_the_cost_between_layers_stays_within_what_the_store_measured() -> None:
    from types import SimpleNamespace

    from layerperf.dataset.predict.model import _fit_between
    from layerperf.dataset.predict.training import MeasuredConfig

    def config(n_layers: int, layers_us: float, ratio: float, threads: int, flagged: bool = False) -> MeasuredConfig:
        return MeasuredConfig(0, "m", SimpleNamespace(threads=threads), (None,) * n_layers,  # type: ignore[arg-type]
                              (layers_us / n_layers,) * n_layers, layers_us * ratio, 10, 0, int(flagged), flagged)

    # two layer counts only, as a sweep of two models at batch 1 and 8, threads 1 and 2 has
    clean = [config(n, us, r, t) for (n, us), r, t in zip([(50, 2e3), (50, 9e3), (120, 8e3), (120, 4e4)] * 2,
                                                         [0.97, 1.0, 1.02, 1.04, 0.99, 1.01, 1.03, 0.98],
                                                         [1, 1, 1, 1, 2, 2, 2, 2], strict=True)]
    outlier = config(120, 4e4, 1.88, 2, flagged=True)  # measured while the host ran slowed
    fit = _fit_between([*clean, outlier])
    assert fit is not None
    ratios = [fit.ratio(us, n, t) for n in (2, 10, 50, 120, 1000) for us in (1e2, 1e4, 1e6) for t in (1, 2)]
    # what the fit gives the others (0.97-1.04, the outlier weighing little): neither 0.48 nor 2.42 nor 1.88
    assert all(0.96 <= r <= 1.06 for r in ratios), ratios
    assert max(ratios) > 1.0 and min(ratios) < 1.0  # and not one figure for all: the fit still tells them apart
    alone = _fit_between([outlier])  # one configuration alone: its ratio
    assert alone is not None and math.isclose(alone.ratio(4e4, 120, 2), 1.88)
    # a factor a few configurations share is no outlier: 8 threads, 6 of 30, all at 1.30
    sizes = [(25, 5e3), (56, 3e4), (58, 8e4)]
    shared = [config(n, us, 1.0 + 0.004 * (i % 5 - 2), 1) for i, (n, us) in enumerate(sizes * 8)]
    shared += [config(n, us, 1.30 + 0.004 * (i % 3 - 1), 8) for i, (n, us) in enumerate(sizes[:2] * 3)]
    fit = _fit_between(shared)
    assert fit is not None
    assert math.isclose(fit.ratio(3e4, 56, 8), 1.30, rel_tol=0.02) and math.isclose(fit.ratio(3e4, 56, 1), 1.0,
                                                                                     rel_tol=0.02)


def test_a_thread_count_collect_would_refuse_is_refused_before_any_store_is_read(
        tmp_path: Path, synthetic: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 100000 predicted "100000 threads"; 0 (collect's runtime default) predicted 1 thread's layers
    err = one_line_error(capsys, "synth.onnx", "--store", str(tmp_path / "none.db"), "--threads", "100000")
    assert "--threads 100000 is more than" in err  # said before "no store at"
    with pytest.raises(SystemExit) as exc:
        main(["predict", "synth.onnx", "--store", str(synthetic), "--threads", "0"])
    assert exc.value.code == 2 and "argument --threads: expected 1 or more, got 0" in capsys.readouterr().err


def _mul(elems: int) -> Op:
    return Op(f"mul{elems}", "Mul", "", f"1x{elems};1x{elems}", f"1x{elems}", "float32;float32", "float32", elems,
              None, 8 * elems, 4 * elems, 0, None)


def test_the_ceiling_is_the_longest_time_of_the_layers_that_did_as_much_work_or_more() -> None:
    from layerperf.dataset.predict.model import _Ceiling

    ceiling = _Ceiling.of(np.array([1.0, 128.0, 128.0, 16384.0]), np.array([30.0, 12.0, 9.0, 10.0]))
    assert ceiling.clamp(128, 1e9) == 12.0  # the two of 128 count (as much work), the one of 1 does not
    assert ceiling.clamp(2, 1e9) == 12.0 and ceiling.clamp(1, 1e9) == 30.0
    assert ceiling.clamp(129, 1e9) == 10.0
    assert ceiling.clamp(1e6, 1e9) == 1e9  # more work than any measured layer: not held
    assert ceiling.clamp(128, 5.0) == 5.0  # never raised


def test_a_layer_is_never_predicted_longer_than_the_longest_of_its_type_that_did_as_much_work_or_more() -> None:
    from layerperf.dataset.predict.training import MeasuredConfig

    one, eight = RunFactors("onnxruntime", 1, 1), RunFactors("onnxruntime", 1, 8)
    # a per-call cost dominates: one-element Muls of 25-30 µs, a time per FLOP of 25-30 µs, beside Muls of
    # 16K-256K elements at 5-40 µs (the kernel sweep's rows that priced bert-base's 128-element mask scaling
    # at 3,387 µs); times not rising with work (the longest of 16K and more is the 32K one's, 38 µs)
    small = [(_mul(1), 25.0 + i % 6, one) for i in range(12)]
    large = [(_mul(e), us, one) for e, us in ((16384, 6.0), (32768, 38.0), (65536, 12.0), (131072, 20.0),
                                              (262144, 30.0))] * 4
    # at 8 threads, bigger layers in less time: no bound on a 1-thread layer
    fast = [(_mul(e), 1.0 + e / 1e6, eight) for e in (1 << 20, 1 << 21, 1 << 22) * 8]
    configs = [MeasuredConfig(i, f"m{i}", run, (op,), (us,), us, 10, 0, 0, False)
               for i, (op, us, run) in enumerate(small + large + fast)]
    predictor = Predictor.fit(configs, fallback=None)
    ceilings, predictor.ceilings = predictor.ceilings, {}
    free = [p.us for p in predictor.layer_times([_mul(128), _mul(300000), _mul(1 << 22), _mul(40000)], one)]
    predictor.ceilings = ceilings
    (mid,) = predictor.layer_times([_mul(128)], one)
    assert free[0] is not None and free[0] > 1000.0  # the rate alone: thousands of µs
    assert mid.how == LEARNED and mid.us == pytest.approx(38.0) and mid.held  # held at the 32K Mul's time
    (between,) = predictor.layer_times([_mul(40000)], one)
    assert free[3] is not None and free[3] > 30.0  # the rate alone: 46 µs for 40K elements
    assert between.us == pytest.approx(30.0) and between.held  # the longest of 64K and more (not 32K's 38 µs)
    # more work than any layer measured at 1 thread: carried by its rate alone, not held by the 8-thread
    # layers that did more work in 2-5 µs
    beyond = predictor.layer_times([_mul(300000), _mul(1 << 22)], one)
    assert [p.us for p in beyond] == free[1:3] and not any(p.held for p in beyond)
    from layerperf.renderers.views.predict import Trained, prediction_view

    pred = predictor.predict([_mul(128), _mul(300000)], one)
    view = prediction_view("m", one, pred, Trained("s.db", len(configs), ("m0",), False))
    assert [r["held"] for r in view.doc["layers"]] == [True, False]
    assert "learned, held at the ceiling" in [r["how"] for r in view.sections[0].shown]
    assert any("1 layer held at the ceiling" in n.text for n in view.sections[1].notes)


def test_a_configuration_built_with_another_model_seed_is_read_and_labelled_so(tmp_path: Path, small: Path) -> None:
    path = altered_copy(small, tmp_path / "seeded.db",
                        "UPDATE configs SET model_seed = 7 WHERE config_id = (SELECT min(config_id) FROM configs)")
    configs = training.read(path).configs
    assert [c.model_seed for c in configs] == [7] + [0] * (len(configs) - 1)
    assert configs[0].label().endswith(" model seed 7") and "seed" not in configs[1].label()


def _lstm(steps: int, batch: int, width: int, hidden: int, dirs: int = 1, name: str = "lstm") -> Op:
    gates = 4 * hidden
    flops = 2 * steps * batch * dirs * gates * (width + hidden)
    return Op(name, "LSTM", "", f"{steps}x{batch}x{width};{dirs}x{gates}x{width};{dirs}x{gates}x{hidden};"
              f"{dirs}x{2 * gates}", f"{steps}x{dirs}x{batch}x{hidden}", "float32;float32;float32;float32",
              "float32", flops, None, 4 * (steps * batch * width + dirs * gates * (width + hidden + 2)),
              4 * steps * dirs * batch * hidden, 4 * dirs * gates * (width + hidden + 2), None)


def test_a_recurrent_layer_is_fitted_on_the_terms_of_its_work() -> None:
    """An LSTM's time as its recurrence's weights read step after step, its FLOPs, its input projection's, its
    steps and a call: learned from layers whose times follow such a law, a shape none of them had is predicted
    by it exactly, where a rate per FLOP learned from them is off by several percent (9% here)."""
    from layerperf.dataset.predict.model import RECURRENT_FIT
    from layerperf.dataset.predict.recurrent import TERMS, RecurrentFit, terms
    from layerperf.dataset.predict.training import MeasuredConfig

    op = _lstm(128, 1, 256, 512)
    got = terms(op)
    assert got is not None and len(got) == len(TERMS)
    assert got == pytest.approx([128 * 2048 * 512 * 4 / 1e6, 2 * 128 * 2048 * 512 / 1e6, 2 * 128 * 2048 * 256 / 1e6,
                                 128.0, 1.0])
    # batch-first (layout=1), told by Y: the same terms; W disagreeing with X, or another op type: none
    first = dataclasses.replace(op, in_shapes="1x128x256;1x2048x256;1x2048x512;1x4096", out_shapes="1x128x1x512")
    assert terms(first) == pytest.approx(got)
    assert terms(dataclasses.replace(op, out_shapes="1x1x512")) == pytest.approx(got)  # Y left out: Y_h tells it
    assert terms(dataclasses.replace(first, out_shapes="1x1x512")) == pytest.approx(got)
    assert terms(dataclasses.replace(op, in_shapes="128x1x256;1x2048x300;1x2048x512;1x4096")) is None
    assert terms(dataclasses.replace(op, op_type="GRU")) is None  # 4 x hidden rows: not a GRU's 3 gates
    assert terms(_mul(64)) is None

    def law(o: Op) -> float:  # µs: 9 per MB of recurrent weights read, 4 per recurrent MFLOP, 2 per input MFLOP
        t = terms(o)
        assert t is not None
        return float(np.dot([9.0, 4.0, 2.0, 0.5, 15.0], t))

    one = RunFactors("onnxruntime", 1, 1)
    rng = np.random.default_rng(0)
    train = [_lstm(int(rng.integers(4, 100)), int(rng.choice([1, 8])), 8 * int(rng.integers(2, 100)),
                   8 * int(rng.integers(4, 60)), name=f"l{i}") for i in range(40)]
    configs = [MeasuredConfig(i, f"m{i}", one, (o,), (law(o),), law(o), 10, 0, 0, False) for i, o in enumerate(train)]
    predictor = Predictor.fit(configs, fallback=None)
    unseen = _lstm(128, 1, 256, 512)  # longer and wider than any it learned from
    (pred,) = predictor.layer_times([unseen], one)
    assert pred.how == RECURRENT_FIT and pred.us == pytest.approx(law(unseen), rel=1e-6)
    fitted = predictor.recurrent
    predictor.recurrent = RecurrentFit({}, fitted.kind)
    (rated,) = predictor.layer_times([unseen], one)  # the op type's regressor: a rate per FLOP
    predictor.recurrent = fitted
    assert rated.how == LEARNED and rated.us is not None and abs(rated.us / law(unseen) - 1) > 0.05, rated.us
    # at a thread count it has no recurrent rows for: the op type's regressor, as before
    (other,) = predictor.layer_times([unseen], RunFactors("onnxruntime", 1, 2))
    assert other.how == LEARNED
    # 40 rows of two shapes tell no five terms apart: nothing is fitted, the regressor predicts
    two = [MeasuredConfig(i, f"m{i}", one, (o,), (law(o),), law(o), 10, 0, 0, False)
           for i, o in enumerate(train[:2] * 20)]
    (few,) = Predictor.fit(two, fallback=None).layer_times([unseen], one)
    assert few.how == LEARNED
