"""Profile PyTorch code where it runs: a ``with`` block, a decorator, or ``start()``/``stop()``.

>>> with layerperf.torch.Profiler() as prof:          # doctest: +SKIP
...     model(x)
>>> layerperf.save(prof.profile, "out")               # doctest: +SKIP

>>> @layerperf.torch.profile(path="out")              # doctest: +SKIP
... def train_step(x, y):
...     loss = loss_fn(model(x), y); opt.zero_grad(); loss.backward(); opt.step()

Every module called inside is timed at its boundaries, by its path under the outermost module called
(``layer1.0.conv1``); a backward pass adds a row per module call's backward (``layer1.0.conv1
(backward)``), an optimizer step a row ``optimizer.step (SGD)``. A run is one call of the decorated
function, or in a ``with`` block (and between ``start()`` and ``stop()``) one outermost call of the
model with what follows it up to the next (see :mod:`layerperf.torch.recording`). The first
``warmup`` runs are left out. When the profile ends, the model is run once more on the first timed
run's inputs (its keyword arguments too), untimed, for each row's shapes, FLOPs and bytes: in
inference mode, or where a backward ran (or the model is in training mode) a forward and a backward (see
:mod:`layerperf.torch.training_cost`). The loss's backward and the optimizer steps are not re-run:
their FLOPs stay unknown.
"""

from __future__ import annotations

import functools
import sys
import threading
import warnings
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any, TypeVar

from layerperf.backends.torch.compiled import eager
from layerperf.backends.torch.options import DEVICES, INSTALL_HINT, LEVELS, import_torch
from layerperf.collectors import Collectors
from layerperf.data.profile import Profile
from layerperf.errors import BackendError, InputError, LayerperfError
from layerperf.renderers.files import atomic_files, ensure_dir, writers
from layerperf.torch.session import InCodeSession, Settings, failure
from layerperf.util.atomic import check_dir

__all__ = ["INSTALL_HINT", "Profiler", "profile"]

F = TypeVar("F", bound=Callable[..., Any])
TRACE, CSV, FLOW_SVG, TIMELINE_SVG = "trace.json", "layers.csv", "memory_flow.svg", "memory_timeline.svg"
FORMATS = (TRACE, CSV, FLOW_SVG, TIMELINE_SVG)


class Profiler:
    """Times every module called between :meth:`start` and :meth:`stop` (or inside ``with``), the
    backward of each and each optimizer step.

    ``level``: 1 modules (forward hooks, lowest cost); 2 modules and the aten ops inside each forward
    (torch.profiler; its first session records the ops' shapes). ``warmup``: runs to leave out.
    ``events`` (perf event strings) / ``perf_config`` (a JSON file, event string -> label): per-row
    perf counters, read at the same boundaries on the runs that happen (level 1). ``memory``: the
    memory profile (``Profile.memory``), resident memory read every ``sample_rate`` row ends (default
    1; 0: none read), and the allocator's events per row from the first run after warm-up, recorded
    under torch.profiler and so kept out of the timed runs. ``profile_device``: ``"cpu"``, or
    ``"cuda"`` (where torch.cuda is available: level 1 times each row by CUDA events at its
    boundaries, the device's time, read at each run's end; with ``memory`` also the caching
    allocator's counters at each boundary; level 2 adds the kernels). ``path``: a directory the
    profile is saved to when it ends; ``formats``: which of its files (trace.json, layers.csv, and with
    ``memory`` memory_flow.svg and memory_timeline.svg; default all it has). Every option is checked
    here, before anything runs.
    """

    def __init__(self, *, level: int = 1, warmup: int = 0, path: str | Path | None = None,
                 formats: Sequence[str] | None = None, events: Sequence[str] | None = None,
                 perf_config: str | Path | None = None, memory: bool = False, sample_rate: int | None = None,
                 profile_device: str = "cpu") -> None:
        self._torch = import_torch()
        self.settings = _settings(level, warmup, path, formats, events, perf_config, memory, sample_rate,
                                  profile_device)
        self._session: InCodeSession | None = None
        self._stack: ExitStack | None = None
        self._profile: Profile | None = None
        self._failed: str | None = None  # the with block raised: why the profile was not made
        self._raised: tuple[BaseException, str] | None = None  # the decorated function's last exception, said
        self._busy = threading.Lock()  # the decorator's: one profiled call at a time

    @property
    def path(self) -> Path | None:
        return self.settings.path

    @property
    def formats(self) -> tuple[str, ...]:
        return self.settings.formats

    def start(self) -> Profiler:
        """Hooks on until :meth:`stop`; runs are the outermost calls of the model."""
        if self._stack is not None or self._session is not None:
            raise InputError("this Profiler is already started")
        self._refuse_ended()
        session = InCodeSession(self.settings, runs_by_call=False)
        stack = ExitStack()
        stack.callback(session.close)
        try:
            stack.enter_context(eager())  # compiled code runs its original modules (backends/torch/compiled)
            if self.settings.level == 2:
                stack.enter_context(session.level2_profiler())
            stack.enter_context(session.recording.hooks())
        except BaseException:
            stack.close()
            raise
        self._session, self._stack = session, stack
        return self

    def stop(self) -> Profile:
        """End the profile: hooks off, shapes and FLOPs taken, saved to ``path`` when given. A profile with
        no timed run (every run was warm-up) is an empty one, with a warning saying so."""
        return self._end()

    def _end(self) -> Profile:
        if self._profile is not None:
            return self._profile
        if self._failed is not None:
            raise BackendError(self._failed)
        session = self._session
        if session is None:
            raise InputError("this Profiler was never started", hint="use it in a with block, call start(), or "
                             "call the decorated function first")
        session.recording.finish()  # the last run ends inside the profiler session and the hooks
        if self._stack is not None:
            self._stack.close()
            self._stack = None
        try:
            self._profile = session.build()
        finally:
            session.close()
        if not self._profile.runs:
            # stacklevel: the user's line (stop(), or the with statement through __exit__)
            warnings.warn(f"layerperf.torch: {self._profile.warnings[0]}", UserWarning, stacklevel=3)
        if self.settings.path is not None:
            _save(self._profile, self.settings.path, self.settings.formats)
        return self._profile

    def __enter__(self) -> Profiler:
        return self.start()

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        if exc is None:
            self._end()
            return
        if self._profile is not None:  # stop() was called inside the block: that profile stands
            return
        self._abandon(exc)  # the block raised: its exception goes on unchanged, and nothing is saved

    @property
    def profile(self) -> Profile:
        """The profile, once stopped."""
        if self._failed is not None:
            raise BackendError(self._failed)
        if self._profile is None:
            raise InputError("the profile is not ended yet: call stop() or leave the with block first")
        return self._profile

    def call(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``fn(*args, **kwargs)`` as one run (the decorator's). A call made while another is being
        profiled (nested, or on another thread) is not a run of its own: nested, it is part of the outer.
        A call that raises lets its exception go on unchanged; its run keeps what ran, the profile's
        warnings name it, and should the process end on that exception the profile is not saved."""
        if self._profile is not None or self._stack is not None or not self._busy.acquire(blocking=False):
            return fn(*args, **kwargs)
        try:
            if self._session is None:
                self._session = InCodeSession(self.settings, runs_by_call=True)
            session = self._session
            session.recording.tid = threading.get_ident()
            with ExitStack() as stack:
                stack.enter_context(eager())
                if self.settings.level == 2 and session.recording.calls >= self.settings.warmup:
                    stack.enter_context(session.level2_profiler())
                stack.enter_context(session.recording.hooks())
                session.recording.begin_call()
                try:
                    return fn(*args, **kwargs)
                except BaseException as exc:
                    said = failure(session.recording, exc, getattr(fn, "__qualname__", "the decorated function"),
                                   self.settings.warmup)
                    self._raised = (exc, said)
                    session.recording.failures.append(said)
                    raise
                finally:
                    session.recording.end_call()
        finally:
            self._busy.release()

    def _abandon(self, exc: BaseException) -> None:
        """The with block raised ``exc``: hooks off, nothing built nor saved; :meth:`stop` and
        :attr:`profile` say which run failed, in one line."""
        session = self._session
        if self._stack is not None:
            self._stack.close()
            self._stack = None
        self._session = None
        said = failure(session.recording if session is not None else None, exc, None, self.settings.warmup)
        self._failed = f"{said}; the profile was not saved"
        if session is not None:
            session.abandon()

    def _refuse_ended(self) -> None:
        if self._profile is not None:
            raise InputError("this Profiler has ended: make a new one to profile again")

    def _stop_at_exit(self) -> None:
        if self._profile is not None or self._session is None:
            return
        if self._raised is not None and _ending_on(self._raised[0]):  # a partial profile: not saved
            print(f"layerperf.torch: {self._raised[1]}; the profile was not saved", file=sys.stderr)
            return
        try:
            self.stop()
        except LayerperfError as exc:  # the process is ending: one line, no traceback
            print(f"layerperf.torch: the profile was not saved: {exc}", file=sys.stderr)


def _ending_on(exc: BaseException) -> bool:
    """Whether the process is ending on ``exc`` (uncaught, or the cause of what is): the interpreter keeps
    an uncaught exception in ``sys.last_value`` before the exit handlers run."""
    last: BaseException | None = getattr(sys, "last_value", None)
    seen: set[int] = set()
    while last is not None and id(last) not in seen:
        if last is exc:
            return True
        seen.add(id(last))
        last = last.__cause__ or last.__context__
    return False


def _settings(level: int, warmup: int, path: str | Path | None, formats: Sequence[str] | None,
              events: Sequence[str] | None, perf_config: str | Path | None, memory: bool,
              sample_rate: int | None, device: str) -> Settings:
    """The options checked, each fault in one line, before anything runs."""
    if isinstance(level, bool) or level not in LEVELS:
        raise InputError(f"level must be 1 (modules) or 2 (modules and aten ops), got {level!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise InputError(f"warmup must be an integer, 0 or more, got {warmup!r}")
    if not memory and sample_rate is not None:
        raise InputError("sample_rate applies to the memory profile only", hint="add memory=True")
    if level == 2 and (events or perf_config or memory):
        raise InputError("perf counters and the memory profile run at level 1 (modules) only")
    if device not in DEVICES:
        raise InputError(f"profile_device must be 'cpu' or 'cuda', got {device!r}")
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise InputError("profile_device='cuda' but torch.cuda is not available here",
                             hint="profile_device='cpu', or a CUDA build of torch on a machine with a GPU")
    chosen = _formats(formats, memory)
    out = Path(path) if path is not None else None
    if out is not None:
        check_dir(out)
    # each group the PMU counts together is checked here, as it is opened (all at once) when profiling
    collectors = Collectors.make(events=events, perf_config=perf_config, passes=1, multiplex=False,
                                 memory=memory, sample_rate=sample_rate)
    return Settings(level, warmup, collectors, device, out, chosen)


def _formats(formats: Sequence[str] | None, memory: bool) -> tuple[str, ...]:
    if formats is None:
        return FORMATS if memory else (TRACE, CSV)
    if isinstance(formats, str):
        formats = [formats]
    bad = [f for f in formats if f not in FORMATS]
    if bad:
        raise InputError(f"unknown format {bad[0]!r}", hint="one of: " + ", ".join(FORMATS))
    pictures = [f for f in formats if f in (FLOW_SVG, TIMELINE_SVG)]
    if pictures and not memory:
        raise InputError(f"format {pictures[0]!r} needs the memory profile", hint="add memory=True")
    if not formats:
        raise InputError("formats is empty: nothing would be saved", hint="one or more of: " + ", ".join(FORMATS))
    return tuple(dict.fromkeys(formats))


def _save(prof: Profile, out: Path, formats: Sequence[str]) -> None:
    """The chosen files of the profile, written atomically (nothing partial on failure)."""
    table = writers(prof)
    names = [n for n in table if n in formats]
    ensure_dir(out)
    with atomic_files(out, names) as files:
        for name, f in zip(names, files, strict=True):
            table[name](prof, f)


def profile(*, level: int = 1, warmup: int = 0, path: str | Path | None = None,
            formats: Sequence[str] | None = None, events: Sequence[str] | None = None,
            perf_config: str | Path | None = None, memory: bool = False, sample_rate: int | None = None,
            profile_device: str = "cpu") -> Callable[[F], F]:
    """Decorate a function: each call of it is one run (a training step: forward, loss, backward and
    optimizer step), the runs aggregated into one profile; options as :class:`Profiler`'s, checked
    when decorating. The hooks are on only during the calls. The function's ``.profiler`` ends the
    profile (``.profiler.stop()`` returns it), or the end of the process does, saving to ``path``."""
    import_torch()
    _settings(level, warmup, path, formats, events, perf_config, memory, sample_rate, profile_device)

    def wrap(fn: F) -> F:
        prof = Profiler(level=level, warmup=warmup, path=path, formats=formats, events=events,
                        perf_config=perf_config, memory=memory, sample_rate=sample_rate,
                        profile_device=profile_device)

        @functools.wraps(fn)
        def inner(*args: Any, **kwargs: Any) -> Any:
            return prof.call(fn, args, kwargs)

        if path is not None:
            import atexit

            atexit.register(prof._stop_at_exit)
        inner.profiler = prof  # type: ignore[attr-defined]
        return inner  # type: ignore[return-value]

    return wrap
