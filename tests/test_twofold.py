"""Segments folded by two processes (readers/twofold.py) give the figures one process gives.

The accumulators of two processes merged (``Folded.merge``) equal those of one that folded every table;
PyTorch traces read with the helper on (every size made tiny, so each has dozens of segments shared out as
the helper comes free) equal the whole-file reading; a helper that fails leaves the figures as they were
(everything folded again in one process).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from layerperf.analysis import aggregate as analysis
from layerperf.data.calls import STRING_COLUMNS, Calls
from layerperf.data.fold import Folded
from layerperf.readers import detect, kineto_links, parallel, twofold
from stream_traces import check_folded as _check
from stream_traces import kineto_launches, tef_nested
from stream_traces import same_figures as _same
from test_parallel_interrupt import wait_until_exited
from test_streaming import tiny  # noqa: F401 - the fixture

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


def test_a_helper_that_dies_is_noticed_at_the_next_segment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The helper dies on its first segment: this process stops at its next one rather than making every table
    left (and then all of them again)."""
    made_here: list[int] = []
    helpers: list[int] = []
    table = detect.read_table(tef_nested(tmp_path / "t.json", n_top=20))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("LAYERPERF_TMPDIR", str(scratch))
    real = parallel.fork

    def fork(work: object) -> parallel.Child:
        child = real(work)  # type: ignore[arg-type]
        assert child is not None
        helpers.append(child.pid)
        return child

    monkeypatch.setattr(parallel, "fork", fork)

    def table_of(item: int) -> Calls:
        if os.getpid() != _HERE:
            os._exit(3)  # gone, as a process killed for memory is
        wait_until_exited(helpers[0])  # the helper is gone by the end of this table
        made_here.append(item)
        return table

    assert twofold.fold(iter(range(50)), table_of, Folded()) is None
    # the first IN_FLIGHT segments went to the helper; then this process made one, or none where handing on the
    # last of them already found the helper gone; all 48 left were made here, before
    assert made_here in ([], [twofold.IN_FLIGHT])
    assert not any(scratch.iterdir())  # the segments' files went with their folder


@pytest.mark.parametrize("child", ["works", "fails", "unforked"])
def test_linking_shared_with_a_child_gives_the_figures_of_one_process(
        tiny: None, helper: list[bool], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
        child: str) -> None:
    """The device activities linked by two processes (readers/kineto_links.py: blocks of 8 activities, a child
    from the first): the calls sorted, half the activities resolved, the waiting and lone ones written by the
    child; where each of its three steps fails, or no child can be forked, this process does it and the figures
    are the same."""
    monkeypatch.setattr(kineto_links, "TWO_FROM", 0)
    monkeypatch.setattr(kineto_links, "BLOCK", 8)
    monkeypatch.setattr(parallel, "spare_cpu", lambda: True)  # a child however few CPUs this run may use
    linking: list[str] = []
    real = parallel.fork

    def fork(work: Any) -> parallel.Child | None:
        if "DiskLinks" in work.__qualname__:
            linking.append(work.__qualname__)
            if child == "fails":
                return real(lambda: os._exit(3))
            if child == "unforked":
                return None
        return real(work)

    monkeypatch.setattr(parallel, "fork", fork)
    linked_dirs: list[int] = []  # after each linking: the child's spill folders still there
    real_init = kineto_links.DiskLinks.__init__

    def init(self: kineto_links.DiskLinks, directory: Path, *args: Any, **kwargs: Any) -> None:
        real_init(self, directory, *args, **kwargs)
        linked_dirs.append(len(list(directory.glob("layerperf-links-*"))))

    monkeypatch.setattr(kineto_links.DiskLinks, "__init__", init)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("LAYERPERF_TMPDIR", str(scratch))
    folded = _check(kineto_launches(tmp_path / "t.json", calls=400, seed=5))
    assert len(linking) == 3 and any("_resolve_all" in name for name in linking)
    assert folded.meta["device_events"] > 2 * 8
    assert not any(scratch.iterdir())  # the spills, the child's too, gone with the reading
    assert linked_dirs and not any(linked_dirs), "the child's spills went once their runs were read"


def test_a_segment_file_not_written_leaves_the_figures_as_one_process_gives(
        tiny: None, helper: list[bool], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """A full disk where a segment is handed on: the helper's share is dropped and one process folds it all."""
    real = twofold._send

    def send(out: Any, item: Any, path: str = "") -> None:
        if item is not None:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(out, item, path)

    monkeypatch.setattr(twofold, "_send", send)
    _check(kineto_launches(tmp_path / "k.json", calls=400))
    assert helper == [False]
