"""A gzipped trace decompressed as it is read, on a thread of its own, a bounded few MiB ahead.

Decompression runs in C and lets go of the interpreter lock, so a thread that inflates the next
blocks while the reader parses the last ones uses the second core. At most :data:`AHEAD` blocks wait
between the two, so memory stays a few MiB whatever the file's size, and a truncated or damaged file
is reported when the reader reaches the damage, never after unpacking it whole.

ISA-L (``pip install isal``, the ``fast`` extra) inflates 2-3x faster than zlib and is used when
installed; zlib-ng's bindings were measured too (README, *Scale*).
"""

from __future__ import annotations

import os
import queue
import threading
import zlib
from collections import deque
from pathlib import Path
from types import ModuleType
from typing import IO, Any

_fast_zlib: ModuleType | None
try:  # optional: the fast extra
    from isal import isal_zlib as _fast_zlib
except ImportError:  # pragma: no cover - depends on what is installed
    _fast_zlib = None

COMPRESSED_BLOCK = 256 << 10  # compressed bytes read at a time
PIECE = 2 << 20  # decompressed bytes made at a time, however well the data compresses
AHEAD = 8  # decompressed pieces waiting at most
_END = object()
_MAGIC = b"\x1f\x8b"  # how a gzip member starts


def engine() -> ModuleType:
    """The inflate implementation in use: ISA-L's when installed, else zlib (``LAYERPERF_INFLATE=zlib``
    picks zlib, to compare)."""
    if os.environ.get("LAYERPERF_INFLATE") == "zlib":
        return zlib
    return _fast_zlib if _fast_zlib is not None else zlib


class GunzipAhead:
    """A read-only binary file over a gzip file's decompressed bytes (every member, in order)."""

    def __init__(self, path: Path, *, engine_module: ModuleType | None = None) -> None:
        self.path = path
        self._zlib = engine_module or engine()
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=AHEAD)
        self._pieces: deque[bytes] = deque()  # inflated, not read yet: the first from ``_off`` on
        self._held = self._off = 0  # bytes in the pieces; bytes of the first already read
        self._done = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._inflate, name="layerperf-gunzip", daemon=True)
        self._thread.start()

    def _inflate(self) -> None:
        try:
            with open(self.path, "rb") as f:
                d = self._zlib.decompressobj(31)
                started = False
                while not self._stop.is_set():
                    data = f.read(COMPRESSED_BLOCK)
                    if not data:
                        break
                    while data and not self._stop.is_set():
                        if not started:  # a member starts here: zero padding (read on past it), or a member
                            data = data.lstrip(b"\0")
                            if not data:
                                break
                            if not data.startswith(_MAGIC[:len(data)]):  # junk, not a next member
                                at = f.tell() - len(data)
                                raise zlib.error(f"{os.fstat(f.fileno()).st_size - at} bytes after the gzip data, "
                                                 f"at byte {at}, are not gzip")
                        out = d.decompress(data, PIECE)  # bounded: a block of zeros inflates 1000-fold
                        started = True
                        if out:
                            self._put(out)
                        if d.eof:  # a member ended: what follows is the next member (or padding)
                            data = d.unused_data
                            d = self._zlib.decompressobj(31)
                            started = False
                        else:
                            data = d.unconsumed_tail
                if started and not d.eof:
                    raise EOFError("compressed file ended before the end-of-stream marker was reached")
            self._put(_END)
        except Exception as exc:  # noqa: BLE001 - handed to the reader, which says what is wrong
            self._put(exc)

    def _put(self, item: Any) -> None:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def _next(self) -> bool:
        """Take the next inflated piece into ``_pieces``; False at the end; raises what inflating raised."""
        if self._done:
            return False
        item = self._queue.get()
        if item is _END:
            self._done = True
            return False
        if isinstance(item, Exception):
            self._done = True
            self.close()
            if isinstance(item, EOFError | zlib.error):
                raise item
            raise zlib.error(str(item)) from item  # ISA-L's own error class: as zlib's
        self._pieces.append(item)
        self._held += len(item)
        return True

    def read(self, n: int = -1) -> bytes:
        """Up to ``n`` decompressed bytes (fewer only at the end); raises what inflating raised. The pieces
        are kept as inflated and only what is returned is copied (joining and re-slicing one buffer copied
        every byte ~4 times over: 1.4 s of a 10M-event trace's reading)."""
        while (n < 0 or self._held - self._off < n) and self._next():
            pass
        want = self._held - self._off if n < 0 else min(n, self._held - self._off)
        out = []
        while want:
            piece = self._pieces[0]
            take = min(want, len(piece) - self._off)
            out.append(piece[self._off:self._off + take] if take < len(piece) else piece)
            self._drop(take)
            want -= take
        return out[0] if len(out) == 1 else b"".join(out)

    def skip(self, n: int) -> int:
        """Drop up to ``n`` decompressed bytes without copying them; how many were dropped."""
        left = n
        while left:
            if self._held == self._off and not self._next():
                break
            step = min(left, len(self._pieces[0]) - self._off)
            self._drop(step)
            left -= step
        return n - left

    def _drop(self, n: int) -> None:
        """Forget the first ``n`` bytes held (at most the first piece's rest)."""
        self._off += n
        if self._off == len(self._pieces[0]):
            self._held -= len(self._pieces.popleft())
            self._off = 0

    def close(self) -> None:
        self._stop.set()
        while True:  # unblock a producer waiting on a full queue
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5)  # gone before the caller forks (a forked thread's locks stay held)

    def __enter__(self) -> GunzipAhead:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_gzip(path: Path) -> IO[bytes]:
    return GunzipAhead(path)  # type: ignore[return-value]
