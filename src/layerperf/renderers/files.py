"""Writers turn a Profile into files. Each states its file name and writes; ``save`` runs them all.

Files are written atomically (:mod:`layerperf.util.atomic`): every writer renders to a temporary file in
the target directory, and only when all of them succeeded are they renamed into place, so a failure
leaves nothing partial. They get a plain ``open()``'s mode, 0666 less the umask.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING

from layerperf.data.profile import Profile
from layerperf.errors import InputError
from layerperf.renderers import chrome, csv, svg
from layerperf.util import atomic

if TYPE_CHECKING:
    pass

WriteFn = Callable[["Profile", IO[bytes]], None]


def writers(profile: Profile | None = None) -> dict[str, WriteFn]:
    """File name -> writer, for every output a profile produces (its memory pictures when it has some)."""
    # lazy: the writers pull the Profile's modules and onnx (0.2 s), which analyze's --output does not need

    table: dict[str, WriteFn] = {chrome.FILENAME: chrome.write, csv.FILENAME: csv.write}
    if profile is not None and profile.memory is not None:
        table.update(svg.writers())
    return table


def ensure_dir(out_dir: Path) -> Path:
    """Create the output directory, or fail with one clear line when it cannot be written."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create output directory {out_dir}: {exc.strerror}") from exc
    if not os.access(out_dir, os.W_OK | os.X_OK):
        raise InputError(f"output directory {out_dir} is not writable")
    return out_dir


@contextmanager
def atomic_files(out_dir: Path, names: list[str]) -> Iterator[list[IO[bytes]]]:
    """Open temporaries for ``names`` in ``out_dir``; rename them all into place only on success."""
    ensure_dir(out_dir)
    what = out_dir / names[0] if len(names) == 1 else out_dir  # what the OS error is about
    try:
        with ExitStack() as stack:
            try:
                temps = stack.enter_context(atomic.files(out_dir, names))
            except OSError as exc:  # the file itself could not be made (/proc, a read-only mount)
                raise InputError(f"cannot create {what}: {exc.strerror or exc}") from exc
            yield temps
    except OSError as exc:
        raise InputError(f"cannot write {what}: {exc.strerror or exc}") from exc


def write_atomic(path: Path, write: Callable[[IO[bytes]], None]) -> Path:
    """Write one file atomically with ``write(fileobj)``."""
    with atomic_files(path.parent, [path.name]) as (f,):
        write(f)
    return path


def save(profile: Profile, out_dir: Path, extra: dict[str, WriteFn] | None = None) -> dict[str, Path]:
    """Write every output of ``profile`` into ``out_dir``; returns file name -> path."""
    table = {**writers(profile), **(extra or {})}
    names = list(table)
    with atomic_files(out_dir, names) as files:
        for name, f in zip(names, files, strict=True):
            table[name](profile, f)
    return {name: out_dir / name for name in names}
