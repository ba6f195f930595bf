"""TVM's own C++ log lines, said as a profile's warnings rather than printed raw.

TVM 0.27's ``LOG(WARNING)`` writes ``[16:56:08] /project/include/tvm/topi/transform.h:1261: Warning: Fast
mode segfaults ...`` straight to ``std::cerr``: its log levels are chosen when TVM itself is built
(``TVM_LOG_CUSTOMIZE``), and ``TVM_LOG_DEBUG`` governs only its debug and verbose lines, so no setting at
run time keeps it off the terminal. :func:`captured` points file descriptor 2 at a temporary file while
TVM compiles; afterwards TVM's warning and error lines read from it are returned, one per message, and
every other byte (whatever else wrote to stderr meanwhile) is written to stderr as it came. When the
compile fails (raises), everything goes back to stderr unchanged; a process killed outright meanwhile (a
crash inside TVM's C++) loses what was written since. The descriptor is the process's: not for use from two
threads at once.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# TVM's LogMessage: "[HH:MM:SS] <file>:<line>" then ": Warning: " or ": Error: " and the message
_LINE = re.compile(rb"\[\d\d:\d\d:\d\d\] \S+:\d+: (?:Warning|Error): (?P<text>.*)")


def said(data: bytes) -> tuple[list[str], bytes]:
    """TVM's warning and error messages in ``data`` (one each, in order, with how many times when more than
    once), and the bytes of every other line."""
    counts: dict[str, int] = {}
    rest: list[bytes] = []
    for line in data.splitlines(keepends=True):
        found = _LINE.fullmatch(line.rstrip(b"\r\n"))
        if found is None:
            rest.append(line)
            continue
        text = " ".join(found["text"].decode(errors="replace").split())
        counts[text] = counts.get(text, 0) + 1
    return [text + (f" ({n} times)" if n > 1 else "") for text, n in counts.items()], b"".join(rest)


@contextmanager
def captured() -> Iterator[list[str]]:
    """Within: file descriptor 2 writes to a temporary file. The list given is filled on leaving with TVM's
    warning and error messages (:func:`said`), the rest written to stderr; a body that raises has the whole
    of it written back instead. Nothing is captured where stderr is closed or cannot be pointed elsewhere
    (no temporary file, a failing dup2): the body runs with stderr as it is."""
    out: list[str] = []
    _flush()
    try:
        saved = os.dup(2)
    except OSError:  # no stderr to keep clean
        yield out
        return
    tmp = _pointed_away(saved)
    if tmp is None:
        os.close(saved)
        yield out
        return
    ok = False
    with tmp:
        try:
            yield out
            ok = True
        finally:
            _flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            data = tmp.read()
            messages, rest = said(data) if ok else ([], data)
            out.extend(messages)
            _write(rest)


def _pointed_away(saved: int) -> Any:
    """A temporary file that descriptor 2 now writes to; None (stderr unchanged) when there is none."""
    try:
        tmp = tempfile.TemporaryFile()  # noqa: SIM115 - the caller closes it (with tmp:)
    except OSError:
        return None
    try:
        os.dup2(tmp.fileno(), 2)
    except OSError:
        tmp.close()
        return None
    return tmp


def _flush() -> None:
    """Python's own buffered stderr, written before the descriptor changes, so that its bytes keep their order."""
    try:
        if sys.stderr is not None:
            sys.stderr.flush()
    except (OSError, ValueError):  # a closed or broken stderr holds nothing to keep
        pass


def _write(data: bytes) -> None:
    try:
        while data:
            data = data[os.write(2, data):]
    except OSError:  # stderr gone (a closed pipe): nothing to tell it
        pass
