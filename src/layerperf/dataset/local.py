"""Configurations measured on this machine, one at a time, in a worker process of their own.

The worker is a fresh interpreter (multiprocessing's spawn) that measures what it is sent
(:func:`~layerperf.dataset.measure.run_config`) and sends the result back; the collect process — the
driver — alone writes the store. A model that crashes its runtime takes only the worker down: the
configuration is recorded as failed with the worker's exit status, and the next one gets a new
worker. The worker ignores SIGINT (the driver stops it) and dies with the driver (PR_SET_PDEATHSIG),
so that a collect killed by SIGKILL leaves no orphan measuring on.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import multiprocessing.connection
import os
import signal
from multiprocessing.connection import Connection
from typing import Any

from layerperf.dataset.config import Config
from layerperf.dataset.measure import ConfigResult, failed, run_config

_PR_SET_PDEATHSIG = 1
_STOP_TIMEOUT_S = 5.0


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the worker ends when its pipe closes
        pass


def worker_main(conn: Connection, parent: int) -> None:
    """The worker process: measure each configuration received until told to stop (None) or orphaned."""
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if os.getppid() != parent:  # the driver died before the death signal was armed
        return
    worker = f"local:{os.getpid()}"
    while True:
        try:
            cfg = conn.recv()
        except EOFError:
            return
        if cfg is None:
            return
        conn.send(run_config(cfg, worker))


def _exit_reason(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


class LocalExecutor:
    """One slot: a configuration at a time, each in a worker process of its own (a fresh interpreter: no
    allocator, thread pool or cache state carried from the configuration before it)."""

    def __init__(self) -> None:
        self._ctx = multiprocessing.get_context("spawn")
        self._proc: Any = None
        self._conn: Connection | None = None
        self._current: Config | None = None

    def free(self) -> int:
        return 0 if self._current is not None else 1

    def submit(self, cfg: Config) -> None:
        if self._proc is None or not self._proc.is_alive():
            self._start()
        assert self._conn is not None
        self._conn.send(cfg)
        self._current = cfg

    def _start(self) -> None:
        ours, theirs = self._ctx.Pipe()
        self._proc = self._ctx.Process(target=worker_main, args=(theirs, os.getpid()), daemon=True,
                                       name="layerperf-collect-worker")
        self._proc.start()
        theirs.close()
        self._conn = ours

    def wait(self) -> list[ConfigResult]:
        """The configuration in flight, once measured (or failed with the worker's death)."""
        cfg, conn, proc = self._current, self._conn, self._proc
        assert cfg is not None and conn is not None and proc is not None
        multiprocessing.connection.wait([conn, proc.sentinel])
        self._current = None
        try:
            if conn.poll():
                result = conn.recv()
                self.close()  # done with it: the next configuration starts a fresh one
                return [result]
        except (EOFError, OSError):
            pass
        proc.join(_STOP_TIMEOUT_S)
        reason = f"the worker process measuring it died ({_exit_reason(proc.exitcode)})"
        self._proc = self._conn = None
        return [failed(cfg, reason, worker=f"local:{proc.pid}")]

    def close(self) -> None:
        """Stop the worker: asked to when idle, killed when measuring (an interrupt)."""
        proc, conn = self._proc, self._conn
        self._proc = self._conn = None
        if proc is None:
            return
        try:
            if self._current is None and conn is not None:
                conn.send(None)
                proc.join(_STOP_TIMEOUT_S)
        except (OSError, BrokenPipeError):
            pass
        if proc.is_alive():
            proc.kill()
            proc.join(_STOP_TIMEOUT_S)
        if conn is not None:
            conn.close()
