"""A big gzipped trace read in two processes: both inflate it, each parses its own stretch.

A gzip stream can only be inflated from its start, so a plain file's split (cut the mapped file near
the middle, :func:`layerperf.readers.stream.split_events`) does not apply. Parsing, not inflating, is
what costs (ISA-L inflates ~1 GB/s; events parse at ~200 MB/s a core), so both processes inflate
from the start: the first parses up to the cut and stops, the second inflates past the first one's
share without parsing it and parses the rest. The share point is worked out from the decompressed
size (the gzip trailer's, or the first MiB's ratio) and weighs the second process's extra inflating;
the cut is the last event start before it, found by both in the same window of bytes, so both find
the same one. As for a plain file, the cut is proven when the first stretch parses, and anything
unexpected makes the caller read the file in one process (which reports any error at its true spot).
"""

from __future__ import annotations

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

WINDOW = 4 << 20  # decompressed bytes before the share point in which the cut is looked for
MIN_DECOMPRESSED = 64 << 20  # below this one process reads it (forking and inflating twice cost more)
_SAMPLE = 1 << 20  # compressed bytes inflated to estimate the ratio
_SKIP = 8 << 20  # decompressed bytes the second process inflates and drops at a time


def is_gzip(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(2) == b"\x1f\x8b"
    except OSError:
        return False


def split(path: Path, parts: int, *, block: int = BLOCK_BYTES) -> list[Callable[[], EventStream]] | None:
    """:func:`~layerperf.readers.stream.split_events` for any trace file: a gzipped one in two stretches
    (see the module's docstring); None when it can't be split."""
    if not is_gzip(path):
        return split_events(path, parts, block=block)
    if parts != 2:
        return None
    sized = _sizes(path, block)
    if sized is None:
        return None
    total, head = sized
    found = _events_start(head)
    if found is None:
        return None
    form, _, first_event, sig = found
    share = first_event + int((total - first_event) * first_share())
    if share - WINDOW <= first_event or total < MIN_DECOMPRESSED:
        return None
    return [partial(_stretch, path, block, sig, "array", share, first_event),
            partial(_stretch, path, block, sig, form, share, None)]


def first_share() -> float:
    """The first process's share of the bytes: the second also inflates the first's stretch, so the first
    parses more, by how fast the engine inflates against parsing (~5.6 ns a byte a core)."""
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


class _Body:
    """One process's stretch of the decompressed bytes, as a file ``_Reader`` reads: the first's ends
    just before the cut (closed with ``]``), the second's starts at the cut."""

    def __init__(self, path: Path, sig: bytes, share: int, begin: int | None) -> None:
        """``begin``: where the first stretch starts (its first event); None for the second stretch."""
        self.src = GunzipAhead(path)
        self.sig, self.share, self.first = sig, share, begin is not None
        self.pos = 0  # decompressed offset of the next byte served (first) or read (second)
        self.pending = b""  # bytes read ahead, starting at pos
        if begin:  # the document's start, before the events: not part of the stretch
            self.pending = self.src.read(begin)
            self.pos = len(self.pending)
            self.pending = b""
        self.end: int | None = None  # where the first stretch ends (the cut), once known
        self.done = False

    def _find_cut(self) -> None:
        """Read up to the share point; the cut is the last event start in the window before it."""
        while self.pos + len(self.pending) < self.share:
            data = self.src.read(_SKIP)
            if not data:
                raise InputError(f"{self.src.path}: shorter than its share point")
            self.pending += data
        lo = self.share - WINDOW - self.pos
        cut = _cut_before(self.pending[lo:lo + WINDOW], self.sig, WINDOW)
        if cut is None:
            raise InputError(f"{self.src.path}: no event starts in the window before the share point")
        if self.first:
            self.end = self.share - WINDOW + cut[0]
        else:
            start = lo + cut[1]
            self.pos += start
            self.pending = self.pending[start:]
            self.end = -1

    def read(self, n: int) -> bytes:
        if self.first:
            return self._read_first(n)
        if self.end is None:
            target = self.share - WINDOW
            while self.pos < target:  # the first's stretch: inflated, not kept
                data = self.src.read(min(_SKIP, target - self.pos))
                if not data:
                    raise InputError(f"{self.src.path}: shorter than its share point")
                self.pos += len(data)
            self._find_cut()
        if self.pending:
            out, self.pending = self.pending[:n], self.pending[n:]
            return out
        return self.src.read(n)

    def _read_first(self, n: int) -> bytes:
        if self.done:
            return b""
        if self.end is None and self.pos + len(self.pending) + n > self.share - WINDOW:
            self._find_cut()
        if self.end is not None and self.pos >= self.end:
            self.done = True
            return b"]"
        want = n if self.end is None else min(n, self.end - self.pos)
        if len(self.pending) < want:
            self.pending += self.src.read(want - len(self.pending))
        out, self.pending = self.pending[:want], self.pending[want:]
        self.pos += len(out)
        if not out:
            self.done = True
        return out

    def close(self) -> None:
        self.src.close()


def _stretch(path: Path, block: int, sig: bytes, form: str, share: int, begin: int | None) -> EventStream:
    body: Any = _Body(path, sig, share, begin)
    reader = _Reader(path, block, body)
    tail: list[Any] = []
    return EventStream(str(path), form, {}, [], _chunks(reader, sig, form, tail), tail)
