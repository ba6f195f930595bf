"""Reading a JSON or gzipped JSON file with one clear error for every way it can be wrong."""

from __future__ import annotations

import contextlib
import gzip
import mmap
import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import IO, Any

import orjson

from layerperf.errors import InputError
from layerperf.readers.decode import GENERIC, Decoding, Event, decode_events, events_of
from layerperf.readers.gunzip import GunzipAhead, open_gzip


def read_bytes(path: Path) -> bytes:
    """The file's bytes, gunzipped when it is gzip (by magic number, whatever the suffix)."""
    if path.is_dir():
        raise InputError(f"{path} is a directory, not a trace file")
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"no such file: {path}") from None
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from exc
    if not raw:
        raise InputError(f"{path} is empty")
    if raw[:2] == b"\x1f\x8b":
        try:
            return gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise InputError(f"{path} is not valid gzip: {exc}") from exc
    if path.suffix == ".gz":
        raise InputError(f"{path} is named .gz but is not gzip")
    return raw


def _position(text: bytes, pos: int) -> str:
    line = text.count(b"\n", 0, pos) + 1
    col = pos - (text.rfind(b"\n", 0, pos) + 1) + 1
    return f"line {line}, column {col}"


def load_json(path: Path) -> Any:
    """Parse a JSON (or .json.gz) file; malformed, empty or truncated input raises InputError."""
    raw = read_bytes(path)
    if not raw.strip():
        raise InputError(f"{path} is empty")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        at = _position(raw, _byte_pos(raw, exc.pos))
        raise InputError(f"{path} is not valid JSON ({exc.msg} at {at})") from None


# -- streaming a Trace Event Format file ---------------------------------------------------------
#
# A million-event trace is a few hundred MB of JSON; parsed whole it becomes ~15 million Python
# objects (GBs, and seconds of page faults). So the event array is parsed a chunk at a time: a chunk
# is cut just before an event that starts like the first one, wrapped in [ ], and parsed. Where the
# chunk ends is never trusted but proven: the wrapped bytes parse only if the cut fell between two
# events of the array (a cut inside a string or a nested object leaves the wrapper unbalanced),
# so the chunks together are exactly the events array. An error before the wrapper's end is a real
# error of the file at that spot; one at the end means the cut was wrong and an earlier one is tried.

BLOCK_BYTES = 256 << 10  # small enough for one chunk's records to stay in cache; 4 MiB blocks were ~25% slower
_MAX_TRIES = 8  # wrong cuts tried in a block before parsing all the rest at once
_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_WS = b" \t\r\n"


@dataclass(eq=False)
class EventStream:
    """A trace's events, parsed a chunk at a time, and everything else in the document.

    ``form`` is ``"array"`` (a bare JSON array of events), ``"object"`` (an object whose
    ``traceEvents`` is the array) or ``"other"`` (any other JSON value; it has no events).
    ``head`` is what is known of the document before its events (the whole document minus the
    events once :meth:`chunks` is exhausted, in ``skeleton``).
    """

    source: str
    form: str
    head: Any
    first: list[Event]
    _rest: Iterator[list[Event]]
    _tail: list[Any] = field(default_factory=list)
    _reader: _Reader | None = None  # what the chunks are read from (None: the document was parsed whole)

    def chunks(self) -> Iterator[list[Event]]:
        """The events, chunk by chunk (once). ``skeleton`` is complete when this is exhausted."""
        yield self.first
        self.first = []
        yield from self._rest

    def decode_as(self, decoding: Decoding) -> None:
        """Decode the chunks not yet yielded with ``decoding`` (:data:`~layerperf.readers.decode.KINETO`: as
        :class:`~layerperf.readers.decode.KinetoEvent`, once the format is known); a document parsed whole keeps
        its events as they are."""
        if self._reader is not None:
            self._reader.decoding = decoding

    def close(self) -> None:
        """Stop reading (closes the file)."""
        close = getattr(self._rest, "close", None)
        if close is not None:
            close()

    @property
    def skeleton(self) -> Any:
        """The document without its events: ``[]`` for an array, the other keys for an object."""
        if self.form == "object" and self._tail:
            return {**self.head, **self._tail[0]}
        return self.head


def _open_stream(path: Path) -> IO[bytes]:
    """The file as a byte stream, gunzipped on the fly when it is gzip (by magic number)."""
    if path.is_dir():
        raise InputError(f"{path} is a directory, not a trace file")
    try:
        f: IO[bytes] = path.open("rb")
    except FileNotFoundError:
        raise InputError(f"no such file: {path}") from None
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from exc
    magic = f.read(2)
    f.seek(0)
    if not magic:  # a 0-byte file is empty whatever its name says, not "not gzip"
        f.close()
        raise InputError(f"{path} is empty")
    if magic == b"\x1f\x8b":
        f.close()
        return open_gzip(path)
    if path.suffix == ".gz":
        f.close()
        raise InputError(f"{path} is named .gz but is not gzip")
    return f


class _Reader:
    """Blocks of a (possibly gzipped) file; where an error is, is worked out only when there is one."""

    def __init__(self, path: Path, block: int, f: IO[bytes] | None = None) -> None:
        self.path = path
        self.block = block
        self.own_file = f is None  # False: a stretch of a file, whose offsets are the stretch's own
        self.f = _open_stream(path) if f is None else f
        self.eof = False
        self.offset = 0  # file offset of buf[0]
        self.buf = b""
        self.decoding = GENERIC

    def more(self) -> bool:
        """Read one more block onto buf; False at the end of the file."""
        if self.eof:
            return False
        try:
            data = self.f.read(self.block)
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            self.close()
            raise InputError(f"{self.path} is not valid gzip ({exc})") from None
        except OSError as exc:
            self.close()
            raise InputError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        if not data:
            self.eof = True
            self.close()
            return False
        self.buf = self.buf + data if self.buf else data
        return True

    def gzip_fault(self) -> str | None:
        """For a gzipped file, what is wrong with its gzip data further on (read on to its end, nothing kept);
        None when nothing is, or the file is not gzipped."""
        if self.eof or not isinstance(self.f, GunzipAhead):
            return None
        try:
            while self.f.skip(BLOCK_BYTES):
                pass
        except (EOFError, zlib.error) as exc:
            return str(exc)
        return None

    def consume(self, n: int) -> None:
        """Drop buf[:n]."""
        self.offset += n
        self.buf = self.buf[n:]

    def position(self, at: int) -> str:
        """'line L, column C' of buf[at]: the lines before buf are counted now, reading the file again."""
        lines, line_start = _lines_before(self.path, self.offset) if self.own_file and self.offset else (0, 0)
        before = self.buf[:at]
        nl = before.count(b"\n")
        if nl:
            line_start = self.offset + before.rfind(b"\n") + 1
        return f"line {lines + nl + 1}, column {self.offset + at - line_start + 1}"

    def close(self) -> None:
        self.f.close()


def _lines_before(path: Path, offset: int, block: int = BLOCK_BYTES) -> tuple[int, int]:
    """(newlines before ``offset`` of the file, offset where the line holding ``offset`` starts)."""
    lines = line_start = done = 0
    try:
        with _open_stream(path) as f:
            while done < offset:
                data = f.read(min(block, offset - done))
                if not data:
                    break
                nl = data.count(b"\n")
                if nl:
                    lines += nl
                    line_start = done + data.rfind(b"\n") + 1
                done += len(data)
    except (OSError, EOFError, zlib.error, InputError):
        pass
    return lines, line_start


def _byte_pos(data: bytes, pos: int) -> int:
    """orjson reports positions in characters; the byte offset of that character in ``data``."""
    if data.isascii():
        return pos
    return len(data.decode("utf-8", "surrogateescape")[:pos].encode("utf-8", "surrogateescape"))


def _error(reader: _Reader, exc: orjson.JSONDecodeError, at: int) -> InputError:
    fault = reader.gzip_fault()
    if fault is not None:  # damaged gzip inflates to junk before its check fails: say the cause, not the junk
        return InputError(f"{reader.path} is not valid gzip ({fault})")
    where = reader.position(at)
    if reader.eof and at >= len(reader.buf):
        return InputError(f"{reader.path} is truncated ({exc.msg} at {where})")
    return InputError(f"{reader.path} is not valid JSON ({exc.msg} at {where})")


def _whole(reader: _Reader) -> Any:
    """Read the rest and parse everything at once (small files, and shapes chunking can't cut)."""
    while reader.more():
        pass
    raw = reader.buf
    if not raw.strip(_WS):
        raise InputError(f"{reader.path} is empty")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        closed = _closed(raw) if raw.lstrip(_WS).startswith(b"[") else None
        if closed is not None:
            with contextlib.suppress(orjson.JSONDecodeError):
                return orjson.loads(closed)
        raise _error(reader, exc, _byte_pos(raw, exc.pos)) from None


def _closed(array: bytes) -> bytes | None:
    """An events array the Trace Event Format lets end without its ``]`` (a process that stopped while
    writing it: Chrome and Perfetto read such files), closed after its last complete event; None when it
    does not end with one (a file cut inside an event stays truncated)."""
    body = array.rstrip(_WS)
    if body.endswith(b","):
        body = body[:-1].rstrip(_WS)
    return body + b"]" if body.endswith((b"}", b"[")) else None


def _check_start(reader: _Reader) -> None:
    # A trace is a JSON array or object: anything else is refused from its first bytes, not after
    # reading a file of any size whole (a 435 MB weights file took minutes to be called "not JSON").
    start = _skip_ws(reader.buf, 0)
    if start < len(reader.buf) and reader.buf[start:start + 1] not in (b"{", b"["):
        raise InputError(f"{reader.path} is not a trace: a trace is a JSON array or object (it starts with '{{' "
                         f"or '['), this file has byte 0x{reader.buf[start]:02x} at {reader.position(start)}")


_BOM = b"\xef\xbb\xbf"  # UTF-8's byte-order mark


def _skip_ws(buf: bytes, i: int) -> int:
    while i < len(buf) and buf[i] in _WS:
        i += 1
    return i


def _whole_stream(reader: _Reader) -> EventStream:
    doc = _whole(reader)
    source = str(reader.path)
    if isinstance(doc, list):
        return EventStream(source, "array", [], events_of(doc), iter(()))
    if isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list):
        events = events_of(doc["traceEvents"])
        return EventStream(source, "object", {k: v for k, v in doc.items() if k != "traceEvents"},
                           events, iter(()))
    return EventStream(source, "other", doc, [], iter(()))


def open_events(path: Path, *, block: int = BLOCK_BYTES) -> EventStream:
    """Open a Trace Event Format file (JSON array or object with ``traceEvents``; .gz or not).

    The document is parsed whole when it fits one block, else its events a chunk at a time
    (see above). Malformed, empty, truncated or non-gzip input raises InputError naming the spot.
    """
    reader = _Reader(path, block)
    try:
        reader.more()
        if reader.buf.startswith(_BOM):  # JSON has none, but an editor may add one: it is no part of the text
            reader.consume(len(_BOM))
        _check_start(reader)
        if reader.eof or len(reader.buf) < block:
            reader.more()
        if reader.eof:
            return _whole_stream(reader)
        return _chunked(reader)
    except BaseException:
        reader.close()
        raise


def _events_start(buf: bytes) -> tuple[str, Any, int, bytes] | None:
    """(form, head, offset of the first event, its signature) of a document's start; None when the
    events can't be found there (then the document is parsed whole)."""
    start = _skip_ws(buf, 0)
    if buf[start:start + 1] == b"[":
        form, head = "array", []
        begin = start + 1
    else:
        m = _KEY.search(buf)
        if buf[start:start + 1] != b"{" or m is None:
            return None
        try:
            head = orjson.loads(buf[:m.start()] + b'"traceEvents":[]}')
        except orjson.JSONDecodeError:
            head = None
        if not isinstance(head, dict):  # the key was not one of the top object's: parse it all
            return None
        head.pop("traceEvents", None)
        form, begin = "object", m.end()
    first_event = _skip_ws(buf, begin)
    sig = _signature(buf, first_event)
    return None if sig is None else (form, head, first_event, sig)


def _chunked(reader: _Reader) -> EventStream:
    found = _events_start(reader.buf)
    if found is None:
        return _whole_stream(reader)
    form, head, first_event, sig = found
    reader.consume(first_event)
    tail: list[Any] = []
    chunks = _chunks(reader, sig, form, tail)
    first = next(chunks, [])
    return EventStream(str(reader.path), form, head, first, chunks, tail, reader)


def _signature(buf: bytes, i: int) -> bytes | None:
    """How the first event starts, up to its first key: ``{"ph"``, ``{\\n    "ph"``..."""
    if buf[i:i + 1] != b"{":
        return None
    q = _skip_ws(buf, i + 1)
    if buf[q:q + 1] != b'"':
        return None
    end = buf.find(b'"', q + 1)
    if end < 0 or end - i > 64 or b"\\" in buf[q:end]:
        return None
    return buf[i:end + 1]


def _parse(reader: _Reader, end: int) -> list[Event] | None:
    """Events in buf[:end] (which must end with an event), or None when the cut was wrong."""
    wrapped = b"".join((b"[", memoryview(reader.buf)[:end], b"]"))  # one copy, not two
    try:
        return decode_events(wrapped, reader.decoding)
    except orjson.JSONDecodeError as exc:
        at = _byte_pos(wrapped, exc.pos) - 1  # the position in buf, past the "[" added
        if at < end:
            raise _error(reader, exc, at) from None
        return None


def _cut_before(buf: bytes | mmap.mmap, sig: bytes, limit: int) -> tuple[int, int] | None:
    """The last (end of previous event, start of next) pair before ``limit``: ``}`` ws ``,`` ws sig."""
    q = buf.rfind(sig, 1, limit)
    while q > 0:
        i = q - 1
        while i > 0 and buf[i] in _WS:
            i -= 1
        if buf[i] == 44:  # ","
            j = i - 1
            while j > 0 and buf[j] in _WS:
                j -= 1
            if buf[j] == 125:  # "}"
                return j + 1, q
        q = buf.rfind(sig, 1, q)
    return None


def _chunks(reader: _Reader, sig: bytes, form: str, tail: list[Any]) -> Iterator[list[Event]]:
    """Yield the events chunk by chunk; buf always starts at an event (or the array's end)."""
    try:
        while reader.more():
            limit = len(reader.buf)
            for _ in range(_MAX_TRIES):
                cut = _cut_before(reader.buf, sig, limit)
                if cut is None:
                    break  # no event starts in this block: read more
                events = _parse(reader, cut[0])
                if events is not None:
                    reader.consume(cut[1])
                    yield events
                    break
                limit = cut[1]
            else:  # events that can't be told apart from what they hold: take the rest whole
                while reader.more():
                    pass
        yield from _last(reader, form, tail)
    finally:
        reader.close()


def _last(reader: _Reader, form: str, tail: list[Any]) -> Iterator[list[Event]]:
    """The rest of the file: the last events, the array's ``]``, and the document's tail.

    Parsed as ``[`` + rest: the array's own ``]`` closes the wrapper, so either that is the whole
    document (array form) or the parser stops right after it with content left over (the tail).
    """
    wrapped = b"[" + reader.buf
    try:
        events = decode_events(wrapped, reader.decoding)
        after = len(reader.buf)
    except orjson.JSONDecodeError as exc:
        at = _byte_pos(wrapped, exc.pos) - 1
        if not exc.msg.startswith("unexpected content after"):
            closed = _closed(wrapped) if form == "array" else None
            if closed is not None:
                with contextlib.suppress(orjson.JSONDecodeError):
                    events = decode_events(closed, reader.decoding)
                    if events:
                        yield events
                    return
            raise _error(reader, exc, at) from None
        after = at
        while after > 0 and reader.buf[after - 1] in _WS:
            after -= 1
        events = decode_events(b"[" + reader.buf[:after], reader.decoding)
    _finish(reader, after, form, tail)
    if events:
        yield events


def _finish(reader: _Reader, after: int, form: str, tail: list[Any]) -> None:
    """Check what follows the events array: nothing (array form) or the rest of the object."""
    rest = reader.buf[after:]
    if form == "array":
        extra = _skip_ws(rest, 0)
        if extra < len(rest):
            raise InputError(f"{reader.path} is not valid JSON (trailing characters at "
                             f"{reader.position(after + extra)})")
        return
    prefix = b'{"traceEvents":[]'
    try:
        doc = orjson.loads(prefix + rest)
    except orjson.JSONDecodeError as exc:
        raise _error(reader, exc, after + _byte_pos(prefix + rest, exc.pos) - len(prefix)) from None
    doc.pop("traceEvents", None)
    tail.append(doc)


def split_events(path: Path, parts: int, *, block: int = BLOCK_BYTES) -> list[Callable[[], EventStream]] | None:
    """The events of a big trace as ``parts`` streams over consecutive stretches, to read side by side.

    The stretches are cut just before an event that starts like the first one, near equal shares of
    the file; the cut is proven when the stretch before it parses (it ends the way a stretch must:
    with a whole event), so a stream raises InputError when a cut was wrong as well as when the file
    is. Each stream is made by calling its function, in the process that reads it (so the copying
    is shared out too). None when the file's events can't be found this way.
    """
    data = _mapped(path)
    found = _events_start(data[:block])
    if found is None or parts < 2:
        return None
    form, _, first_event, sig = found
    cuts = [(first_event, first_event)]
    for k in range(1, parts):
        cut = _cut_before(data, sig, first_event + (len(data) - first_event) * k // parts)
        if cut is None or cut[1] <= cuts[-1][1]:
            return None
        cuts.append(cut)

    def stretch(k: int) -> EventStream:
        begin = cuts[k][1]
        if k + 1 < len(cuts):  # a stretch ending at a cut: closed as an array of its own
            body, stretch_form = _Stretch(data, begin, cuts[k + 1][0], b"]"), "array"
        else:
            body, stretch_form = _Stretch(data, begin, len(data), b""), form
        reader = _Reader(path, block, body)  # type: ignore[arg-type]
        tail: list[Any] = []
        return EventStream(str(path), stretch_form, {}, [], _chunks(reader, sig, stretch_form, tail), tail, reader)

    return [partial(stretch, k) for k in range(len(cuts))]


def _mapped(path: Path) -> bytes | mmap.mmap:
    """A plain file mapped into memory (read lazily, shared with forked readers); gzip decompressed
    (small files only: a big gzip file is read as a stream)."""
    with path.open("rb") as f:
        if f.read(2) == b"\x1f\x8b":
            return read_bytes(path)
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


_PAGE = mmap.PAGESIZE
_RELEASE = 16 << 20  # pages of a mapping read past are given back every this many bytes


class _Stretch:
    """``data[begin:end] + suffix`` as a file that ``_Reader`` reads, without copying it up front."""

    def __init__(self, data: bytes | mmap.mmap, begin: int, end: int, suffix: bytes) -> None:
        self.data, self.pos, self.end, self.suffix = data, begin, end, suffix
        self.released = begin - begin % _PAGE

    def read(self, n: int) -> bytes:
        if self.pos >= self.end:
            out, self.suffix = self.suffix, b""
            return out
        stop = min(self.end, self.pos + n)
        out = self.data[self.pos:stop]
        self.pos = stop
        self._release()
        return out

    def _release(self, least: int = _RELEASE) -> None:
        """Give back the mapped pages read past, ``least`` bytes at a time: the page cache's to keep, they
        count in this process's resident memory while mapped (a 2.7 GB file would be 2.7 GB of it)."""
        upto = self.pos - self.pos % _PAGE
        if isinstance(self.data, mmap.mmap) and upto - self.released >= max(least, 1):
            with contextlib.suppress(OSError, ValueError, AttributeError):
                self.data.madvise(mmap.MADV_DONTNEED, self.released, upto - self.released)
            self.released = upto

    def close(self) -> None:
        """The stretch read: its pages are given back whatever their number (a process reads many)."""
        self._release(0)
