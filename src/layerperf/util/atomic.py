"""Files written whole or not at all: a temporary file beside the target, renamed into place.

The one helper every writer of a user-visible file goes through. The temporary is created with
mode 0666 and the process umask applied by the kernel, as a plain ``open()`` would, so the final
file gets the mode the user expects (0644 under umask 022) — not ``tempfile.mkstemp``'s 0600.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from layerperf.errors import InputError

_MODE = 0o666  # less the umask, by the kernel
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)


def open_temp(directory: Path, name: str) -> tuple[IO[bytes], Path]:
    """A new empty file in ``directory`` for what will become ``name``, open for writing."""
    tmp = directory / f".{name}.{os.getpid()}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, _FLAGS, _MODE)
    return os.fdopen(fd, "wb"), tmp


@contextlib.contextmanager
def files(directory: Path, names: list[str]) -> Iterator[list[IO[bytes]]]:
    """Temporaries for ``names`` in ``directory``, all renamed into place only when the block succeeds."""
    temps: list[tuple[IO[bytes], Path]] = []
    try:
        for name in names:
            temps.append(open_temp(directory, name))
        yield [f for f, _ in temps]
        for f, _ in temps:
            f.close()
        for (_, tmp), name in zip(temps, names, strict=True):
            os.replace(tmp, directory / name)
    finally:
        for f, tmp in temps:
            f.close()
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)


def write_bytes(target: Path, data: bytes, *, fsync: bool = False) -> None:
    """Write ``data`` to ``target`` atomically; ``fsync`` first makes it durable (for caches)."""
    with files(target.parent, [target.name]) as (f,):
        f.write(data)
        if fsync:
            f.flush()
            os.fsync(f.fileno())


def process_temp(data: bytes, prefix: str, suffix: str) -> Path:
    """``data`` in a new file of the temp directory, removed when this process exits (a model handed
    to ONNX Runtime, or to the counting worker, by path)."""
    fd, name = tempfile.mkstemp(prefix=prefix, suffix=suffix)
    path = Path(name)
    atexit.register(path.unlink, missing_ok=True)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


def check_dir(out_dir: Path) -> Path:
    """Refuse, before any work, an output directory that could not be created or written; creates nothing."""
    probe = out_dir
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise InputError(f"cannot create output directory {out_dir}: {probe} is a file, not a directory")
    if probe.exists() and not os.access(probe, os.W_OK | os.X_OK):
        what = "output directory" if probe == out_dir else "directory"
        raise InputError(f"{what} {probe} is not writable")
    return out_dir
