"""Reading in two processes, interrupted: the forked child is stopped and reaped, never left running.

A Ctrl-C while this process reads its stretch stops the child at once (its stretch is of no use); a second
Ctrl-C while waiting for the child's result kills it too. The children here would sleep ten minutes; an
alarm turns a hang into a failure.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from layerperf.readers import parallel


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture()
def children(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[parallel.Child]]:
    forked: list[parallel.Child] = []
    real = parallel.fork

    def fork(work: Any) -> parallel.Child | None:
        child = real(work)
        assert child is not None
        forked.append(child)
        return child

    monkeypatch.setattr(parallel, "fork", fork)
    monkeypatch.setattr(parallel.gzsplit, "stretches", lambda path, even=True: ([lambda: None] * 2, lambda: None))
    # side_by_side forks only while no other thread runs; a test run earlier in this worker may have left one
    # for good (TVM's tuning keeps a thread pool). These children run only the tests' own reads: fork anyway.
    monkeypatch.setattr(parallel.threading, "active_count", lambda: 1)
    old = signal.signal(signal.SIGALRM, _hang)
    signal.alarm(60)  # a hang fails the test rather than the suite
    try:
        yield forked
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        for child in forked:
            child.kill()


def _hang(*_: object) -> None:
    raise AssertionError("waited on a child that should have been stopped")


_HERE = os.getpid()


def _read(stream: Any, k: int) -> int:
    """Here: interrupted; in the child: ten minutes' work (whichever stretch each takes first)."""
    if os.getpid() != _HERE:
        time.sleep(600)
        return 1
    raise KeyboardInterrupt


def test_failed_read_stops_the_child(children: list[parallel.Child]) -> None:
    """A stretch that fails here: the child's stretches are of no use either (one process reads the file
    again), so it is stopped at once rather than left to take every stretch there is."""

    def read(stream: Any, k: int) -> int:
        if os.getpid() != _HERE:
            time.sleep(600)
            return 1
        raise ValueError("a damaged stretch")

    assert parallel.side_by_side(Path("trace.json"), read) is None
    assert len(children) == 1 and not _alive(children[0].pid)


def test_interrupted_read_stops_the_child(children: list[parallel.Child]) -> None:
    with pytest.raises(KeyboardInterrupt):
        parallel.side_by_side(Path("trace.json"), _read)
    assert len(children) == 1 and not _alive(children[0].pid)


def test_interrupted_wait_kills_the_child(children: list[parallel.Child]) -> None:
    child = parallel.fork(lambda: time.sleep(600))
    assert child is not None

    def interrupt(*_: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.2)  # the second Ctrl-C, while waiting for the result
    with pytest.raises(KeyboardInterrupt):
        child()
    signal.signal(signal.SIGALRM, _hang)
    signal.alarm(60)
    assert not _alive(child.pid)


def test_a_reaped_child_closes_nothing_of_anyone_else(tmp_path: Path) -> None:
    """Killing a child already waited on closes no descriptor: its pipe's number may belong to another file
    by then (found in review: ``kill`` closed it a second time)."""
    child = parallel.fork(lambda: 1)
    assert child is not None and child() == 1
    with (tmp_path / "other.txt").open("w") as other:
        child.kill()
        other.write("still open")
    assert (tmp_path / "other.txt").read_text() == "still open"


def wait_until_exited(pid: int) -> None:
    """Until the process has exited (not reaped: its parent still waits for it), up to a minute however slow
    the host."""
    for _ in range(6000):
        if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} never ended")


def test_a_failed_child_is_noticed_at_the_next_stretch(children: list[parallel.Child], monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    """The child fails on its first stretch: this process stops at its next one (and the caller reads the file
    in one process), rather than reading every stretch left first."""
    monkeypatch.setattr(parallel.gzsplit, "stretches", lambda path, even=True: ([lambda: None] * 20, lambda: None))
    read_here: list[int] = []

    def read(stream: Any, k: int) -> int:
        if os.getpid() != _HERE:
            raise ValueError("a damaged stretch")
        wait_until_exited(children[0].pid)  # the child has failed by the end of this stretch
        read_here.append(k)
        return k

    assert parallel.side_by_side(Path("trace.json"), read) is None
    assert read_here == [0]  # all 20, before


def test_a_child_done_first_is_not_taken_for_a_failed_one(children: list[parallel.Child],
                                                          monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The child takes the second stretch; this process takes the last, and is held until the child has found
    none left, sent its result and ended: that child did not fail, and the stretches come back (it was once
    taken for a failed one, and the file read again in one process)."""
    monkeypatch.setattr(parallel.gzsplit, "stretches", lambda path, even=True: ([lambda: None] * 3, lambda: None))
    started, taken = tmp_path / "started", tmp_path / "taken"
    real_read = os.read

    def read_token(fd: int, n: int) -> bytes:
        got = real_read(fd, n)
        if os.getpid() == _HERE and n == parallel._TOKEN and got == (2).to_bytes(2, "little"):
            taken.touch()
            wait_until_exited(children[0].pid)  # held right after taking the last stretch's number
        return got

    monkeypatch.setattr(parallel.os, "read", read_token)

    def read(stream: Any, k: int) -> int:
        if os.getpid() != _HERE:  # the child, on the second stretch: held until the last one is taken here
            started.touch()
            _wait_for(taken)
        else:
            _wait_for(started)
        return k

    assert parallel.side_by_side(Path("trace.json"), read) == [0, 1, 2]


def _wait_for(path: Path) -> None:
    for _ in range(6000):  # up to a minute, however slow the host
        if path.exists():
            return
        time.sleep(0.01)
    raise AssertionError(f"{path} never came")


def test_a_child_reaped_is_never_signalled_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once waited for, a child's pid may be another process's: kill() after the wait sends nothing."""
    child = parallel.fork(lambda: 7)
    assert child is not None and child() == 7
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(os, "kill", lambda pid, sig: sent.append((pid, sig)))
    child.kill()
    assert sent == []
    running = parallel.fork(lambda: time.sleep(60))
    assert running is not None
    monkeypatch.undo()
    running.kill()  # a live one is killed and reaped, and only once
    sent.clear()
    monkeypatch.setattr(os, "kill", lambda pid, sig: sent.append((pid, sig)))
    running.kill()
    assert sent == []
