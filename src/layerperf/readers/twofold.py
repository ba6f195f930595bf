"""A trace's segments folded by two processes: this one and a forked helper.

After a big trace is read, its records are merged in nesting order and cut into segments (whole nesting
trees); each segment becomes a table of calls (nesting, device time, identities: numpy work) that is folded
into the per-identity accumulators (:class:`layerperf.data.fold.Folded`). That used to run in one process
while the other CPU idled: ~30% of a 10M-event PyTorch trace's time (an ONNX Runtime profile's folding is
mostly the merge: it stays in one process). Here the merging stays in this process, and each segment goes
to the helper while it has fewer than :data:`IN_FLIGHT` waiting or in hand (it says when it has finished one
with a byte on a pipe), else to this process. A segment goes by a file in a private temporary folder, its name
on the pipe: one waiting lets the helper start the next as soon as it is done with the last, while this process
makes a table of its own (handed one at a time, it idled then: at 10M events the fold took 2.7-2.8 s, now
2.0-2.1). The helper folds its segments into accumulators of its own, returned at the end and merged in
(:meth:`Folded.merge`); sums come out in another order (equal to ~1e-16), everything else exactly as one
process folds them. A helper that fails or cannot be forked returns None and the caller
folds everything again in one process.
"""

from __future__ import annotations

import os
import pickle
import shutil
import tempfile
from collections.abc import Callable, Iterable
from typing import Any

from layerperf.data.calls import Calls
from layerperf.data.fold import Folded
from layerperf.readers import parallel
from layerperf.readers.spill import temp_dir

MIN_RECORDS = 1 << 19  # below this (8 segments) one process folds it. A Kineto trace of 1M events has 751K
# records: folded with the helper since segments hold 64K records, it reads in 5-9% less time (whole commands
# alternated, both orders); before (256K-record segments) the helper saved nothing measurable there
_LENGTH = 8  # bytes of a frame's length on the pipe
IN_FLIGHT = 2  # segments handed to the helper and not yet folded there, at most


def worth_it(folded: Folded, records: int) -> bool:
    """Linux with a spare CPU, no other threads (forking them is unsafe), no table handed on as it is folded
    (a timeline wants them in order), and enough records."""
    return parallel.spare_cpu() and folded.sink is None and records >= MIN_RECORDS


def fold_all(items: Callable[[], Iterable[Any]], table_of: Callable[[Any], Calls], folded: Folded, records: int, *,
             extra: Callable[[], Any] = lambda: None,
             reset: Callable[[], None] = lambda: None) -> tuple[Folded, Any]:
    """``table_of(item)`` of every item of ``items()`` folded into ``folded``: by two processes where it pays
    (:func:`worth_it`, ``records`` to fold), else by this one — also when the helper fails, with fresh
    accumulators then and ``reset()`` called first (to undo what the tables changed). The accumulators, and
    what ``extra()`` gave in the helper (None without one)."""
    if worth_it(folded, records):
        declared = list(folded.idents)
        shared = fold(items(), table_of, folded, extra)
        if shared is not None:
            return folded, shared[0]
        reset()
        folded = Folded(quantiles=folded.quantiles, sink=folded.sink)
        folded.declare(declared)
    for item in items():
        folded.add(table_of(item))
    return folded, None


def fold(items: Iterable[Any], table_of: Callable[[Any], Calls], folded: Folded,
         extra: Callable[[], Any] = lambda: None) -> tuple[Any] | None:
    """Fold ``table_of(item)`` of every item into ``folded``, shared with a helper process; what ``extra()``
    gave in the helper once done (the state its tables changed that the caller needs back), in a 1-tuple.
    None when the helper failed: ``folded`` is then partly folded, and the caller starts again in one
    process."""
    folder = tempfile.mkdtemp(prefix="layerperf-fold-", dir=temp_dir())
    try:
        return _fold(items, table_of, folded, extra, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _fold(items: Iterable[Any], table_of: Callable[[Any], Calls], folded: Folded, extra: Callable[[], Any],
          folder: str) -> tuple[Any] | None:
    items_r, items_w = os.pipe()
    done_r, done_w = os.pipe()
    idents, quantiles = list(folded.idents), folded.quantiles

    def helper() -> tuple[Folded, Any]:
        os.close(items_w)
        os.close(done_r)
        mine = Folded(quantiles=quantiles)
        mine.declare(idents)  # the same slots as the caller's, in the same order
        with os.fdopen(items_r, "rb") as f:
            while (item := _receive(f)) is not None:
                mine.add(table_of(item))
                os.write(done_w, b"\x01")
        return mine, extra()

    child = parallel.fork(helper)
    os.close(items_r)
    os.close(done_w)
    if child is None:
        os.close(items_w)
        os.close(done_r)
        return None
    os.set_blocking(done_r, False)
    sent, finished = 0, 0
    try:
        with os.fdopen(items_w, "wb") as out:
            for item in items:
                n, ended = _count(done_r)
                if ended:  # the helper is gone (it writes until told to stop): no use going on
                    raise BrokenPipeError
                finished += n
                if sent - finished < IN_FLIGHT:  # the helper takes this one, now or once done with the last
                    _send(out, item, os.path.join(folder, f"{sent}.pickle"))
                    sent += 1
                    continue
                folded.add(table_of(item))
            _send(out, None)
        got = child()
    except OSError:  # the helper died (a broken pipe), or a segment's file was not written (a full disk): its
        child.kill()  # share is lost, and one process folds it all without files
        return None
    except BaseException:
        child.kill()
        raise
    finally:
        os.close(done_r)  # only now: the helper says it is done with each segment, its last one too
    if got is None:
        return None
    theirs, state = got
    folded.merge(theirs)
    return (state,)


def _count(fd: int) -> tuple[int, bool]:
    """Bytes waiting on the non-blocking pipe ``fd`` (one per segment the helper finished), read; and whether
    the pipe has ended (the helper exited)."""
    n = 0
    while True:
        try:
            got = os.read(fd, 4096)
        except BlockingIOError:
            return n, False
        if not got:
            return n, True
        n += len(got)


def _send(out: Any, item: Any, path: str = "") -> None:
    """``item`` written to the file ``path``, its name on the pipe ``out`` (None: an empty frame, the end)."""
    if item is not None:
        with open(path, "wb") as f:
            pickle.dump(item, f, protocol=pickle.HIGHEST_PROTOCOL)
    data = b"" if item is None else os.fsencode(path)
    out.write(len(data).to_bytes(_LENGTH, "little"))
    out.write(data)
    out.flush()


def _receive(f: Any) -> Any:
    """The next item :func:`_send` wrote (its file removed once read); None at the end."""
    head = f.read(_LENGTH)
    n = int.from_bytes(head, "little") if len(head) == _LENGTH else 0
    if not n:
        return None
    path = os.fsdecode(f.read(n))
    with open(path, "rb") as item:
        got = pickle.load(item)
    os.unlink(path)
    return got
