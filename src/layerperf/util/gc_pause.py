"""The garbage collector paused for a stretch of work, and resumed as it was."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while the block runs, and resume it after (only if it ran before).
    For work that makes many objects forming no cycles (a collection would walk them all for nothing), or
    that is timed (a collection would be charged to it)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
