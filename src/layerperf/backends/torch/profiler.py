"""torch.profiler sessions without kineto's chatter.

torch 2.13's kineto writes a ``USDT:`` line (and at some log levels ``STAGE:`` lines) to the process's
standard error at every profiler start and stop, straight to file descriptor 2, whatever Python's
``sys.stderr`` is and whatever its log-level variables say: level 2 opens a session per profiled run,
so a profile printed hundreds of them. Starting and stopping a session here sends descriptor 2 to a
temporary file meanwhile and writes back every line but those.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

CHATTER = (b"USDT:", b"STAGE:")


@contextlib.contextmanager
def without_chatter() -> Iterator[None]:
    """While inside, what is written to descriptor 2 is held back; on leaving it is written there, less
    kineto's start/stop lines."""
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no descriptor 2 to redirect: nothing to hide either
        yield
        return
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            kept = [line for line in held.read().splitlines(keepends=True) if not line.startswith(CHATTER)]
            if kept:
                os.write(2, b"".join(kept))


class Session:
    """``torch.profiler.profile(**options)`` whose start and stop are quiet; everything else is the
    session's own (``events()``, ``export_chrome_trace``...)."""

    def __init__(self, **options: Any) -> None:
        from torch.profiler import profile

        self.inner = profile(**options)

    def __enter__(self) -> Any:
        with without_chatter():
            self.inner.__enter__()
        return self.inner

    def __exit__(self, *exc: Any) -> Any:
        with without_chatter():
            return self.inner.__exit__(*exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
