"""Reading a big trace in two processes: this one and a forked child.

Decoding events and reading their fields is Python work that holds the interpreter lock, so a second
core helps only in a second process. :func:`side_by_side` (the streamed readings) has the file cut into
stretches at event boundaries (:func:`layerperf.readers.gzsplit.stretches`) and deals them out through a
pipe of stretch numbers: this process takes the first, the child the second, then each the next one left
whenever it is free; the results come back in stretch order. :func:`read` (a table read whole) cuts a plain
file in two halves (:func:`layerperf.readers.stream.split_events`) and merges the two parts in file order
(:func:`layerperf.readers.tef.merge`). Anything unexpected, a wrong cut or a damaged file included, returns
None and the caller reads the file the ordinary way, which also gives the error message with its true
position.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from layerperf.data.calls import Calls
from layerperf.errors import InputError
from layerperf.readers import gzsplit
from layerperf.readers.stream import EventStream, split_events

MIN_BYTES = 32 << 20  # below this, forking costs more than it saves
PEEK_BYTES = 1 << 20  # what is read of such a file to tell its format


def worth_it(path: Path, *, gzipped_too: bool = False) -> bool:
    """Linux with a spare core, no other threads in this process (forking them is unsafe), a big plain
    file — or a big gzipped one when ``gzipped_too`` (folding: :mod:`layerperf.readers.gzsplit`)."""
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            gzipped = f.read(2) == b"\x1f\x8b"
    except OSError:
        return False
    if gzipped and not gzipped_too:  # a table read whole: one process inflating ahead
        return False
    if gzipped:
        size *= 8  # what it inflates to, at the least ratio worth it
    return spare_cpu() and size >= MIN_BYTES


def spare_cpu() -> bool:
    """Whether a forked child can work beside this process: Linux, a second CPU this process may use, and no
    other thread here (forking one is unsafe)."""
    return sys.platform == "linux" and len(os.sched_getaffinity(0)) >= 2 and threading.active_count() == 1


def read(path: Path, reader: ModuleType, meta: dict[str, Any]) -> Calls | None:
    """The table of ``path`` read in two processes by ``reader`` (a module with part and merge)."""
    try:
        streams = split_events(path, 2)
    except InputError:
        return None
    if streams is None:
        return None
    first, second = streams
    parts = _both(lambda _: reader.part(first()), lambda: reader.part(second()), (InputError,))
    if parts is None:
        return None
    table: Calls = reader.merge(parts, meta)
    table.meta["processes"] = 2
    return table


def side_by_side(path: Path, read: Callable[[EventStream, int], Any], *, even: bool = True,
                 finish: Callable[[], Any] | None = None) -> list[Any] | None:
    """``read(stream, k)`` of every stretch ``k`` of the trace at ``path`` (plain or gzipped,
    :func:`layerperf.readers.gzsplit.stretches`; ``even`` as there), in stretch order, read by this process
    and a forked child side by side: this process takes the first stretch, the child the second, then each
    the next one nobody has taken whenever it is free, so both stay busy to the end however unevenly the
    file's parts cost. ``finish``: called in each process once it has taken its last stretch, its two results
    (this process's, then the child's) following the stretches' in the list. None when the file can't be cut
    or either side fails (the caller reads it in one process, which reports any error rightly)."""
    try:
        cut = gzsplit.stretches(path, even=even)
    except (OSError, ValueError):  # the file can't be mapped (an address-space limit, say): one process
        return None
    if cut is None:
        return None
    opens, done = cut
    # the stretches' numbers, taken one at a time from a pipe both processes read (a read is atomic)
    r, w = os.pipe()
    try:
        os.write(w, b"".join(k.to_bytes(_TOKEN, "little") for k in range(len(opens))))
    finally:
        os.close(w)

    def take(token: bytes, other: Child | None = None) -> tuple[list[tuple[int, Any]], Any]:
        got = []
        try:
            while len(token) == _TOKEN:
                k = int.from_bytes(token, "little")
                got.append((k, read(opens[k](), k)))
                ended = other is not None and other.ended()  # looked at before the next number is taken:
                token = os.read(r, _TOKEN)
                if ended and len(token) == _TOKEN:  # a child that ended with numbers left failed
                    raise _ChildFailed
        finally:
            done()
        return got, finish() if finish is not None else None

    if threading.active_count() != 1:  # forking other threads is unsafe (one left from the peek, say)
        os.close(r)
        return None
    try:
        first = os.read(r, _TOKEN)  # taken before the child exists: the first stretch is this process's
        both = _both(lambda child: take(first, child), lambda: take(os.read(r, _TOKEN)), (Exception,))
    finally:
        os.close(r)
    if both is None:
        return None
    (mine, my_end), (theirs, their_end) = both
    results = sorted(mine + theirs, key=lambda kr: kr[0])
    if [k for k, _ in results] != list(range(len(opens))):
        return None
    return [r for _, r in results] + ([my_end, their_end] if finish is not None else [])


_TOKEN = 2  # bytes of a stretch's number in the pipe (gzsplit.MAX_STRETCHES fits)


class _ChildFailed(Exception):
    """The child ended while stretches were left: the file is read again in one process."""


def _both(mine: Callable[[Child], Any], theirs: Callable[[], Any],
          failures: tuple[type[BaseException], ...]) -> list[Any] | None:
    """``mine(child)`` here and ``theirs()`` in a forked child, side by side: both results, or None when either
    fails (here: one of ``failures``, and the child is stopped at once) or no child can be forked.
    Interrupted here (Ctrl-C), the child's work is of no use: it is stopped at once."""
    child = fork(theirs)
    if child is None:
        return None
    try:
        got = mine(child)
    except failures:
        child.kill()
        return None
    except BaseException:
        child.kill()
        raise
    other = child()
    return None if got is None or other is None else [got, other]


class Child:
    """A forked child working: call it to wait for its result (None on failure); :meth:`kill` stops it. Either
    way it is reaped, also when the wait itself is interrupted (a second Ctrl-C kills it then), and once reaped
    it is never signalled again (its pid may be another process's by then)."""

    def __init__(self, pid: int, fd: int) -> None:
        self.pid, self.fd = pid, fd
        self.reaped = False

    def __call__(self) -> Any:
        fd, self.fd = self.fd, -1  # the file object owns (and closes) it now
        try:
            with os.fdopen(fd, "rb") as f:
                payload = f.read()
            _, status = os.waitpid(self.pid, 0)
            self.reaped = True
        except BaseException:
            self.kill()
            raise
        if os.waitstatus_to_exitcode(status) != 0 or not payload:
            return None
        return pickle.loads(payload)

    def ended(self) -> bool:
        """Whether the child has ended (or is sending its result): its pipe reads without waiting."""
        return self.fd >= 0 and bool(select.select([self.fd], [], [], 0)[0])

    def kill(self) -> None:
        if self.fd >= 0:  # not handed to a reader yet
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1
        if self.reaped:
            return
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.waitpid(self.pid, 0)
        self.reaped = True


def fork(work: Callable[[], Any]) -> Child | None:
    """Run ``work`` in a forked child (None when it cannot be forked)."""
    r, w = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return None
    if pid == 0:  # the child: never returns into the caller's code
        status = 1
        try:
            os.close(r)
            payload = pickle.dumps(work(), protocol=pickle.HIGHEST_PROTOCOL)
            with os.fdopen(w, "wb") as out:
                out.write(payload)
            status = 0
        except BaseException:  # noqa: BLE001 - the parent reads the file again and reports
            pass
        finally:
            os._exit(status)
    os.close(w)
    return Child(pid, r)
