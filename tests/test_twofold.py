"""Segments folded by two processes (readers/twofold.py) give the figures one process gives.

The accumulators of two processes merged (``Folded.merge``) equal those of one that folded every table;
PyTorch traces read with the helper on (every size made tiny, so each has dozens of segments shared out as
the helper comes free) equal the whole-file reading; a helper that fails leaves the figures as they were
(everything folded again in one process).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

from layerperf.analysis import aggregate as analysis
from layerperf.data.calls import STRING_COLUMNS, Calls
from layerperf.data.fold import Folded
from layerperf.readers import detect, twofold
from stream_traces import kineto_launches, tef_nested
from test_streaming import _check, _same, tiny  # noqa: F401 - the fixture, and the whole-file comparison

_HERE = os.getpid()


@pytest.fixture()
def helper(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """The helper on for any number of records; each fold's outcome (True: the helper's share merged)."""
    monkeypatch.setattr(twofold, "MIN_RECORDS", 0)
    outcomes: list[bool] = []
    real = twofold.fold

    def fold(*args: object, **kwargs: object) -> object:
        got = real(*args, **kwargs)  # type: ignore[arg-type]
        outcomes.append(got is not None)
        return got

    monkeypatch.setattr(twofold, "fold", fold)
    return outcomes


def test_merged_accumulators_equal_one_process(tmp_path: Path) -> None:
    """Tables folded alternately into two accumulators and merged: every grouping and aggregate as one."""
    table = detect.read_table(tef_nested(tmp_path / "t.json", n_top=300))
    rows = np.arange(len(table))
    pieces = [table.take(rows[k::5]) for k in range(5)]
    one, a, b = (Folded(quantiles=True) for _ in range(3))
    for k, piece in enumerate(pieces):
        one.add(piece)
        (a if k % 2 else b).add(piece)  # b meets some identities first, a others
    a.merge(b)
    assert a.calls == one.calls == len(table)
    for by in ("name", "type", "provider", "shape"):
        for how in analysis.AGGREGATES:
            want, got = one.table(by, how), a.table(by, how)
            keys_w, keys_g = _keys(want), _keys(got)  # groups come in the order identities were met: reordered
            assert sorted(keys_w) == sorted(keys_g)
            _same(want, got.take(np.asarray([keys_g.index(k) for k in keys_w], dtype=np.int64)), how)


def _keys(table: Calls) -> list[tuple[str, ...]]:
    columns = [table.labels(c).tolist() for c in STRING_COLUMNS]
    return [tuple(col[i] for col in columns) for i in range(len(table))]


@pytest.mark.parametrize("seed", [2, 5])
def test_two_processes_fold_as_one(tiny: None, helper: list[bool], tmp_path: Path, seed: int) -> None:  # noqa: F811
    folded = _check(kineto_launches(tmp_path / "t.json", calls=400, seed=seed))
    assert helper == [True], "the helper folded a share and it was merged"
    assert folded.calls > 0


def test_a_failed_helper_leaves_the_figures_as_one_process_gives(tiny: None, helper: list[bool], tmp_path: Path,  # noqa: F811
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    real = Folded.add

    def add(self: Folded, table: object) -> None:
        if os.getpid() != _HERE:
            raise MemoryError("the helper's share")
        real(self, table)  # type: ignore[arg-type]

    monkeypatch.setattr(Folded, "add", add)
    _check(kineto_launches(tmp_path / "k.json"))
    assert helper == [False], "the helper failed, and everything was folded again here"


def test_a_helper_that_dies_is_noticed_at_the_next_segment(tmp_path: Path) -> None:
    """The helper dies on its first segment: this process stops at its next one rather than making every table
    left (and then all of them again)."""
    failed = tmp_path / "failed"
    made_here: list[int] = []
    table = detect.read_table(tef_nested(tmp_path / "t.json", n_top=20))

    def table_of(item: int) -> Calls:
        if os.getpid() != _HERE:
            failed.touch()
            os._exit(3)  # gone, as a process killed for memory is
        for _ in range(6000):  # up to a minute for the helper to die, however slow the host
            if failed.exists():
                break
            time.sleep(0.01)
        made_here.append(item)
        return table

    assert twofold.fold(iter(range(50)), table_of, Folded()) is None
    assert 0 < len(made_here) < 10, made_here  # all 49 left, before
