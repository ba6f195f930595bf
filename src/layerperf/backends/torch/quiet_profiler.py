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


class QuietProfiler:
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


def activities(device: str) -> list[Any]:
    """torch.profiler's activities for a run on ``device`` ("cpu", "cuda", "cuda:N"): the CPU's, and the
    GPU's kernels and copies where the model runs on one."""
    from torch.profiler import ProfilerActivity

    return [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if device.startswith("cuda") else [])]


def events_with_links(prof: Any) -> list[Any]:
    """``prof.events()`` (a stopped torch.profiler session's), completed where an older torch leaves out
    what torch 2.13's events carry: every device event (a kernel, a memcpy) its ``linked_correlation_id``
    (the id of the CPU op that launched it), and every CPU op recorded with shapes its ``input_dtypes``
    (which level 2 needs to replay the op for its work). torch 2.11 keeps both in kineto's results
    only: a device event is found there by its start (ns from the trace's start) and name, a CPU op by
    its id (the correlation id) where the recorded shapes agree. An op with a list of tensors among its
    arguments also gets their element types (:func:`_add_list_dtypes`)."""
    from torch.autograd import DeviceType

    events = list(prof.events())
    device = [e for e in events if e.device_type != DeviceType.CPU]
    shaped = [e for e in events if e.device_type == DeviceType.CPU and getattr(e, "input_shapes", None)]
    need_links = bool(device) and not hasattr(device[0], "linked_correlation_id")
    need_dtypes = bool(shaped) and not hasattr(shaped[0], "input_dtypes")
    if not (need_links or need_dtypes):
        _add_list_dtypes(prof, events)
        return events
    results = prof.profiler.kineto_results
    if need_links:
        origin = results.trace_start_ns()
        links = {(k.start_ns() - origin, k.name()): k.linked_correlation_id() for k in results.events()
                 if k.device_type() != DeviceType.CPU}
        for e in device:
            e.linked_correlation_id = links.get((round(e.time_range.start * 1000), e.name), 0)
    if need_dtypes:
        ops = {k.correlation_id(): k for k in results.events() if k.device_type() == DeviceType.CPU}
        for e in shaped:
            k = ops.get(e.id)
            if k is not None and [list(x) for x in k.shapes()] == [list(x) for x in e.input_shapes]:
                e.input_dtypes = list(k.dtypes())
    _add_list_dtypes(prof, events)
    return events


def _add_list_dtypes(prof: Any, events: list[Any]) -> None:
    """Every CPU op recorded with shapes that takes a list of tensors (``cat``, ``stack``: ``input_dtypes``
    says ``TensorList`` there, ``structured_input_shapes`` gives each tensor's dims) gets ``list_tensors``:
    per argument, the list's tensors as (element type, identity) — ``("float32", <its TensorImpl's
    address>)``, one tensor listed twice the same identity; None for an argument that is no list — which
    torch.profiler's events leave out and its event tree (an op found by its correlation id) keeps.
    Nothing is added where the tree is not there (another torch)."""
    listed = {e.id: e for e in events if "TensorList" in (getattr(e, "input_dtypes", None) or ())}
    if not listed:
        return
    try:
        stack = list(prof.profiler.kineto_results.experimental_event_tree())
    except (AttributeError, RuntimeError):
        return
    while stack:
        node = stack.pop()
        stack.extend(getattr(node, "children", ()))
        ev = listed.get(getattr(node, "correlation_id", None))
        inputs = getattr(getattr(node, "extra_fields", None), "inputs", None)
        if ev is None or not isinstance(inputs, list) or len(inputs) != len(ev.input_dtypes):
            continue
        ev.list_tensors = [[_described(t) for t in value] if kind == "TensorList" and isinstance(value, list)
                           else None for kind, value in zip(ev.input_dtypes, inputs, strict=True)]


def _described(t: Any) -> tuple[str | None, int | None]:
    """A recorded tensor's element type (``float32``) and identity; None each where not recorded."""
    dtype = getattr(t, "dtype", None)
    return None if dtype is None else str(dtype).removeprefix("torch."), getattr(t, "impl_ptr", None)
