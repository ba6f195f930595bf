"""The one exception root of layerperf.

Library code raises these; the CLI turns them into one line on stderr and exit code 2.
"""

from __future__ import annotations

import re


class LayerperfError(Exception):
    """A problem the user can act on: a message naming it, and optionally a hint."""

    exit_code = 2

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message} ({self.hint})"


class InputError(LayerperfError):
    """Bad user input: a missing or corrupt file, a malformed flag, an unknown name."""


class MissingDependency(LayerperfError):
    """An optional library or system package is not installed."""

    def __init__(self, what: str, install: str) -> None:
        super().__init__(f"{what} is not installed", f"install it with: {install}")


class CounterError(InputError):
    """A perf counter cannot be opened or read as asked: an event this machine does not count, a group
    too big for its PMU, no permission. An InputError (a request to change), as every option checked
    before anything runs: ``Profiler(events=["cycles"])``, ``layerperf.profile(..., events=...)`` and
    ``--events`` fail alike, one line (exit 2)."""


class BackendError(InputError):
    """The runtime refused the model or failed running it: a shape or type it rejects, a kernel that fails.

    The message names the model and carries the runtime's own words, in one line.
    """


def first_line(exc: BaseException) -> str:
    """The reason in an onnx or runtime exception (ONNX Runtime's included), in one line."""
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    # ORT prefixes "[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : " and wraps a kernel's own words in
    # "Non-zero status code returned while running ... Status Message: "; the reason is at the end
    line = line.rsplit(" : ", 1)[-1].rsplit("Status Message: ", 1)[-1]
    # onnx prefixes its messages with where they come from; the user knows which node: keep the why
    line = re.sub(r"\[[A-Za-z]+\]\s*|Inference error\(s\):\s*|\(op_type:[^)]*\):\s*", "", line)
    return line.strip()
