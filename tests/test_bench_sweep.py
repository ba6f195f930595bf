"""bench: sweeps over input shapes and thread counts give one row per combination."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest

from layerperf.bench.sweep import combinations, csv_text, sweep_op
from layerperf.errors import InputError

FAST: dict[str, Any] = {"samples": 3, "min_time_ms": 0.05, "warmup_max_s": 0.05, "overhead": False, "speed_wait_s": 0}


def test_combinations_are_the_product_threads_fastest() -> None:
    combos = combinations({"X": ["1x4", "1x8"], "W": [(4, 4), (8, 8), (16, 16)]}, [1, 2])
    assert len(combos) == 2 * 3 * 2
    assert combos[0] == ({"X": (1, 4), "W": (4, 4)}, 1)
    assert combos[1] == ({"X": (1, 4), "W": (4, 4)}, 2)
    assert combos[-1] == ({"X": (1, 8), "W": (16, 16)}, 2)
    assert combinations({}, [1, 2, 4]) == [({}, 1), ({}, 2), ({}, 4)]


def test_empty_sweep_values_are_an_error() -> None:
    with pytest.raises(InputError, match="no values"):
        combinations({"X": []}, [1])
    with pytest.raises(InputError, match="malformed"):
        combinations({"X": ["1xq"]}, [1])


def test_sweep_rows_one_per_combination() -> None:
    results = sweep_op("Relu", {"X": "1x8:float16"}, sweep={"X": ["1x8", "2x8"]}, threads=[1, 2], **FAST)
    assert len(results) == 4
    assert [(r.inputs[0].shape, r.threads) for r in results if r.inputs[0] is not None] == [
        ((1, 8), 1), ((1, 8), 2), ((2, 8), 1), ((2, 8), 2)]
    assert {r.inputs[0].dtype for r in results if r.inputs[0] is not None} == {"float16"}  # dtype kept
    assert [r.flops for r in results] == [8, 8, 16, 16]
    rows = list(csv.DictReader(io.StringIO(csv_text(results))))
    assert len(rows) == 4
    assert [(row["in_shapes"], row["threads"]) for row in rows] == [("1x8", "1"), ("1x8", "2"), ("2x8", "1"),
                                                                     ("2x8", "2")]
    assert all(float(row["median_us"]) > 0 for row in rows)


def test_sweep_of_an_input_not_otherwise_given() -> None:
    results = sweep_op("MatMul", {"A": "4x8"}, sweep={"B": ["8x2", "8x3"]}, **FAST)
    assert [r.outputs[0].shape for r in results] == [(4, 2), (4, 3)]


def test_bad_combination_names_itself() -> None:
    with pytest.raises(InputError, match=r"sweep B=9x2: MatMul rejects"):
        sweep_op("MatMul", {"A": "4x8"}, sweep={"B": ["8x2", "9x2"]}, **FAST)
