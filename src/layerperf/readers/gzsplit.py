"""A big trace cut into stretches that two processes share out, plain or gzipped.

A plain file is cut near equal shares of its bytes (:func:`layerperf.readers.stream.split_events`). A gzip
stream can only be inflated from its start, so each process inflates the whole of it once, forward, and
parses the stretches it takes, skipping the others' (ISA-L inflates ~1 GB/s; events parse at 50-200 MB/s a
core). A stretch ends at the last event start before its share point, looked for in the same window of
bytes by every process, so all find the same cut. The stretches are taken one at a time by whichever
process is free (:func:`layerperf.readers.parallel.side_by_side`): a trace whose events cost more to read in
one part of the file than another (PyTorch writes its operators before their kernels) still keeps both
busy to the end. As for a plain file, a cut is proven when the stretch before it parses, and anything
unexpected makes the caller read the file in one process (which reports any error at its true spot).
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from layerperf.errors import InputError
from layerperf.readers.gunzip import GunzipAhead, engine
from layerperf.readers.stream import (
    BLOCK_BYTES,
    EventStream,
    _chunks,
    _cut_before,
    _events_start,
    _Reader,
    split_events,
)

WINDOW = 4 << 20  # decompressed bytes before a share point in which the cut is looked for
MIN_DECOMPRESSED = 64 << 20  # below this one process reads it (forking and inflating twice cost more)
STRETCH_BYTES = 8 << 20  # (decompressed) bytes a stretch has about: what a free process takes at a time
MAX_STRETCHES = 64  # a record keeps its part in a byte (streaming.RECORD's "part")
_SAMPLE = 1 << 20  # compressed bytes inflated to estimate the ratio
_SKIP = 8 << 20  # decompressed bytes read ahead at a time while a cut is looked for


def is_gzip(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(2) == b"\x1f\x8b"
    except OSError:
        return False


def count(size: int) -> int:
    """How many stretches a trace of ``size`` (decompressed) bytes is cut into."""
    return max(2, min(MAX_STRETCHES, size // STRETCH_BYTES))


Opens = list[Callable[[], EventStream]]  # per stretch: what makes its stream


def stretches(path: Path, *, block: int = BLOCK_BYTES, even: bool = True) -> tuple[Opens, Callable[[], None]] | None:
    """The trace at ``path`` (plain or gzipped) as :func:`count` stretches: a function per stretch making its
    stream, called in the process that reads it (a gzipped trace's stretches in increasing order there), and
    one that ends this process's reading; None when it can't be cut. ``even=False``: a gzipped trace whose
    events cost the same throughout (ONNX Runtime's) is cut in two only, the first process's share the
    larger by what the second spends inflating it (:func:`first_share`): neither then inflates the whole
    file for the sake of balance."""
    if not is_gzip(path):
        opened = split_events(path, count(path.stat().st_size), block=block)
        return None if opened is None else (opened, lambda: None)
    sized = _sizes(path, block)
    if sized is None:
        return None
    total, head = sized
    found = _events_start(head)
    if found is None or total < MIN_DECOMPRESSED:
        return None
    form, _, first_event, sig = found
    if even:
        n = count(total - first_event)
        shares = [first_event + (total - first_event) * k // n for k in range(n)]  # shares[0]: the first event
    else:
        n, shares = 2, [first_event, first_event + int((total - first_event) * first_share())]
    if shares[1] - first_event <= WINDOW or (n == 2 and total - shares[1] <= WINDOW):  # windows apart
        return None
    passes = _Passes(path, sig, shares)
    return [partial(_stretch, passes, block, sig, form if k == n - 1 else "array", k) for k in range(n)], passes.close


def first_share() -> float:
    """The first process's share of a trace cut in two: the second also inflates the first's stretch, so the
    first parses more, by how fast the engine inflates against parsing (~5.6 ns a byte a core)."""
    inflate_ns = 3.0 if engine() is zlib else 0.7  # a decompressed byte, measured on this kind of host
    parse_ns = 5.6
    return (parse_ns + inflate_ns) / (2 * parse_ns + inflate_ns)


def _sizes(path: Path, block: int) -> tuple[int, bytes] | None:
    """(the decompressed size, its first ``block`` bytes): the trailer's size (modulo 4 GiB, of the last
    member) taken where it agrees with the first MiB's ratio, else that ratio's estimate."""
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            sample = f.read(_SAMPLE)
            f.seek(-4, 2)
            trailer = int.from_bytes(f.read(4), "little")
        d = zlib.decompressobj(31)
        out = d.decompress(sample, 64 << 20)
    except (OSError, zlib.error):
        return None
    used = len(sample) - len(d.unconsumed_tail) - len(d.unused_data)
    if not out or used <= 0:
        return None
    estimate = size * len(out) / used
    wraps = round((estimate - trailer) / (1 << 32))
    exact = trailer + max(wraps, 0) * (1 << 32)
    total = exact if abs(exact - estimate) < 0.25 * estimate else int(estimate)
    return total, out[:block]


class _Pass:
    """One process's single forward pass over the decompressed bytes: ``buf`` holds them from ``start``,
    ``off`` into it is where reading is."""

    def __init__(self, path: Path, sig: bytes, shares: list[int]) -> None:
        self.src = GunzipAhead(path)
        self.sig, self.shares = sig, shares
        self.buf, self.start, self.off = b"", 0, 0
        self.cuts: dict[int, tuple[int, int]] = {}  # share index -> (end of the stretch before, start of its own)

    def cut(self, k: int) -> tuple[int, int]:
        """The cut at share point ``k`` (1 or more): the last event start in the window before it."""
        if k not in self.cuts:
            lo = self.shares[k] - WINDOW
            found = _cut_before(self._ahead(lo, self.shares[k]), self.sig, WINDOW)
            if found is None:
                raise InputError(f"{self.src.path}: no event starts in the window before a share point")
            self.cuts[k] = (lo + found[0], lo + found[1])
        return self.cuts[k]

    def _ahead(self, lo: int, hi: int) -> bytes:
        """Bytes [lo, hi) (at or after where reading is), read ahead: reading stays where it is."""
        if lo < self.start + self.off:
            raise InputError(f"{self.src.path}: stretches taken out of order")
        self.buf, self.start, self.off = self.buf[self.off:], self.start + self.off, 0
        while self.start + len(self.buf) < hi:
            data = self.src.read(max(_SKIP, hi - self.start - len(self.buf)))
            if not data:
                raise InputError(f"{self.src.path}: shorter than its share point")
            self.buf += data
        return self.buf[lo - self.start:hi - self.start]

    def skip_to(self, offset: int) -> None:
        """Move reading forward to ``offset``, inflating and dropping what lies before it."""
        if offset < self.start + self.off:
            raise InputError(f"{self.src.path}: stretches taken out of order")
        gap = offset - self.start - len(self.buf)
        if gap > 0:  # past what is held: the rest is dropped as it is inflated, never copied
            if self.src.skip(gap) < gap:
                raise InputError(f"{self.src.path}: shorter than its share point")
            self.start, self.buf = offset, b""
        self.off = offset - self.start

    def read(self, n: int, end: int | None) -> bytes:
        """Up to ``n`` bytes from where reading is, none at or past ``end`` (None: the file's end)."""
        pos = self.start + self.off
        if end is not None:
            n = min(n, end - pos)
        if n <= 0:
            return b""
        if self.off >= len(self.buf):
            self.start, self.buf, self.off = pos, self.src.read(max(n, BLOCK_BYTES)), 0
        out = self.buf[self.off:self.off + n]
        self.off += len(out)
        return out


class _Passes:
    """Each process's :class:`_Pass` (made where it is first used: a forked child makes its own)."""

    def __init__(self, path: Path, sig: bytes, shares: list[int]) -> None:
        self.path, self.sig, self.shares = path, sig, shares
        self.mine: _Pass | None = None
        self.pid = -1

    def here(self) -> _Pass:
        if self.pid != os.getpid():
            self.mine, self.pid = _Pass(self.path, self.sig, self.shares), os.getpid()
        assert self.mine is not None
        return self.mine

    def close(self) -> None:
        if self.mine is not None and self.pid == os.getpid():
            self.mine.src.close()
            self.mine = None


class _Body:
    """Stretch ``k`` of the decompressed bytes, as a file ``_Reader`` reads: from its cut (the first, from
    the first event) to the next cut, closed with ``]`` (the last, to the file's end). The next cut is
    looked for when reading reaches its window, not before: a stretch is never held whole."""

    def __init__(self, passes: _Passes, k: int) -> None:
        self.src = src = passes.here()
        last = len(passes.shares) - 1
        if k and k not in src.cuts:  # the stretch before was another process's: skipped up to the window
            src.skip_to(passes.shares[k] - WINDOW)
        src.skip_to(src.cut(k)[1] if k else passes.shares[0])
        self.k = k
        self.window = None if k == last else passes.shares[k + 1] - WINDOW  # where the next cut is looked for
        self.end: int | None = None  # the next cut, once found
        self.suffix = b"" if k == last else b"]"

    def read(self, n: int) -> bytes:
        src = self.src
        if self.end is None and self.window is not None and src.start + src.off + n > self.window:
            self.end = src.cut(self.k + 1)[0]
        out = src.read(n, self.end if self.end is not None else self.window)
        if not out:
            out, self.suffix = self.suffix, b""
        return out

    def close(self) -> None:
        """Nothing: the pass goes on to this process's next stretch (:meth:`_Passes.close` ends it)."""


def _stretch(passes: _Passes, block: int, sig: bytes, form: str, k: int) -> EventStream:
    body: Any = _Body(passes, k)
    reader = _Reader(passes.path, block, body)
    tail: list[Any] = []
    return EventStream(str(passes.path), form, {}, [], _chunks(reader, sig, form, tail), tail, reader)
