"""A co-runner: one operator run in a loop by another process, pinned to a CPU set, while something is measured.

Interference between workloads on one machine is a resource factor of its own: an operator beside
another one on the same cores shares their time; on other cores of the same socket it still shares
the last-level cache and the memory bandwidth. ``layerperf bench OP --corun OP2`` measures OP while
OP2 runs beside it, ``layerperf collect --corun OP2`` stores whole models measured so.

The co-runner is a separate process (``python -m layerperf.bench.corun``), so that it does not share
the measured process's interpreter lock or its runtime's thread pools: it builds its operator
through the backend's single-operator capability, says ``ready`` once warm, calls it until its
standard input closes or says ``stop``, and then prints how many calls it made in how long.

A co-runner's operator is written ``OPTYPE:NAME=DIMS,NAME=DIMS`` (its inputs by their schema names,
as ``--input`` takes them), e.g. ``MatMul:A=512x512,B=512x512``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType

from layerperf import backends
from layerperf.bench.build import InputArg, build_op
from layerperf.bench.parse import parse_input
from layerperf.bench.runtime import runtime_options
from layerperf.errors import BackendError, InputError
from layerperf.util.affinity import allowed_cpus, format_cpus, parse_cpus, pinned

CORES = ("shared", "separate")
READY_TIMEOUT_S = 120.0  # building the op imports the runtime: seconds on a loaded host
_STOP_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class CorunSpec:
    """The co-runner's operator: its type and inputs (name, ``DIMS[:dtype]`` as ``--input`` takes it)."""

    op_type: str
    inputs: tuple[tuple[str, str], ...]

    @classmethod
    def parse(cls, text: str) -> CorunSpec:
        """``MatMul:A=512x512,B=512x512`` -> the spec; InputError in one line when malformed."""
        op_type, _, rest = text.strip().partition(":")
        if not op_type.isidentifier():
            raise InputError(f"malformed co-runner '{text}'",
                             hint="OPTYPE:NAME=DIMS,..., e.g. MatMul:A=256x256,B=256x256")
        items = [i.strip() for i in rest.split(",") if i.strip()] if rest else []
        if not items:
            raise InputError(f"co-runner '{text}' gives no inputs", hint="e.g. MatMul:A=256x256,B=256x256")
        inputs = []
        for item in items:
            name, _, value = item.partition("=")
            parse_input(item)  # checks NAME=DIMS[:dtype] now, in the driver, not in the co-runner
            inputs.append((name.strip(), value.strip()))
        return cls(op_type, tuple(inputs))

    def text(self) -> str:
        return f"{self.op_type}:" + ",".join(f"{n}={v}" for n, v in self.inputs)

    def checked(self) -> CorunSpec:
        """The spec, its operator checked as the co-runner builds it (no data, no session): an unknown
        operator or inputs it does not take are an InputError now, in the driver, not a co-runner that fails
        to start configuration after configuration."""
        build_op(self.op_type, self.input_args(), data=False)
        return self

    def input_args(self) -> dict[str, InputArg]:
        out = {}
        for name, value in self.inputs:
            _, dims, dtype = parse_input(f"{name}={value}")
            out[name] = InputArg(dims, dtype)
        return out


def placement(run_cpus: frozenset[int] | None, threads: int,
              cores: str) -> tuple[frozenset[int] | None, frozenset[int]]:
    """(the measured run's CPUs, the co-runner's): ``shared`` puts the co-runner on the run's CPUs (all
    this process may use where the run is not pinned); ``separate`` on the others, the run then taking
    the first ``threads`` CPUs (at least one) where it is not pinned. InputError where no CPU is left."""
    if cores not in CORES:
        raise InputError(f"unknown co-runner placement '{cores}'", hint="shared or separate cores")
    allowed = allowed_cpus()
    if cores == "shared":
        return run_cpus, run_cpus or allowed
    run = run_cpus or frozenset(sorted(allowed)[:max(1, threads)])
    rest = allowed - run
    if not rest:
        raise InputError(f"--separate-cores: no CPU is left for the co-runner beside the run's "
                         f"({format_cpus(run)} of {format_cpus(allowed)})",
                         hint="give the run fewer CPUs (--cpus, --threads) or use --shared-cores")
    return run, rest


class CoRunner:
    """The co-runner process, as a context manager: started and warm on entry, stopped on exit, with its
    throughput (``calls_per_s``) read back."""

    def __init__(self, spec: CorunSpec, cpus: frozenset[int], backend: str = backends.DEFAULT) -> None:
        self.spec, self.cpus, self.backend = spec, cpus, backend
        self.calls_per_s: float | None = None
        self._proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> CoRunner:
        cmd = [sys.executable, "-m", "layerperf.bench.corun", self.spec.text(), "--cpus", format_cpus(self.cpus),
               "--backend", self.backend]
        self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True)
        line = _read_line(self._proc, READY_TIMEOUT_S)
        if line.strip() != "ready":
            why = self._failure()
            raise BackendError(f"the co-runner {self.spec.text()} did not start: {why}")
        return self

    def _failure(self) -> str:
        assert self._proc is not None
        self._proc.kill()
        _, err = self._proc.communicate()
        lines = [x for x in (err or "").strip().splitlines() if x.strip()]
        return lines[-1] if lines else f"exit code {self._proc.returncode}"

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        proc = self._proc
        if proc is None:
            return
        try:
            out, _ = proc.communicate("stop\n", timeout=_STOP_TIMEOUT_S)
            done = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
            if done.get("seconds"):
                self.calls_per_s = done["calls"] / done["seconds"]
        except (subprocess.TimeoutExpired, ValueError, OSError):
            proc.kill()
            proc.wait()


def _read_line(proc: subprocess.Popen[str], timeout_s: float) -> str:
    """The co-runner's first line, or "" when it exits or says nothing within ``timeout_s``."""
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(proc.stdout.readline() if proc.stdout else ""), daemon=True)
    reader.start()
    reader.join(timeout_s)
    return got[0] if got else ""


def _run(spec: CorunSpec, cpus: frozenset[int], backend: str) -> None:
    inputs = spec.input_args()
    with pinned(cpus):
        one = build_op(spec.op_type, inputs)
        prepared = backends.single_op(backend).prepare(one.model, one.feed, threads=len(cpus),
                                                       options=runtime_options(backend, "basic",
                                                                               "CPUExecutionProvider"))
        call = prepared.call
        for _ in range(3):
            call()
        stop = threading.Event()

        def wait_for_stop() -> None:  # a line or the end of stdin
            sys.stdin.readline()
            stop.set()

        threading.Thread(target=wait_for_stop, daemon=True).start()
        print("ready", flush=True)
        calls, t0 = 0, time.perf_counter()
        while not stop.is_set():
            call()
            calls += 1
        print(json.dumps({"calls": calls, "seconds": time.perf_counter() - t0}), flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """The co-runner process: ``python -m layerperf.bench.corun SPEC --cpus LIST [--backend NAME]``."""
    p = argparse.ArgumentParser(prog="layerperf.bench.corun", description=__doc__)
    p.add_argument("spec")
    p.add_argument("--cpus", required=True)
    p.add_argument("--backend", default=backends.DEFAULT)
    args = p.parse_args(argv)
    try:
        _run(CorunSpec.parse(args.spec), parse_cpus(args.cpus), args.backend)
    except Exception as exc:  # the parent reads the last line of stderr as the reason
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
