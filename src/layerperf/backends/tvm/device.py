"""A parsed target made a TVM Target, and the device it runs on — or one line saying it cannot run here."""

from __future__ import annotations

from typing import Any

import tvm
from tvm.target import codegen

from layerperf.backends.tvm.target import (
    HOST_KINDS,
    TargetSpec,
    host_arch_matches,
    parse_target,
    resolve_host_cpu,
    with_num_cores,
)
from layerperf.errors import InputError


def host_cpu() -> str:
    """The CPU LLVM detects here (``znver4``, ``skylake-avx512``...)."""
    return str(codegen.llvm_get_system_cpu())


def tvm_target(spec: TargetSpec | str, num_cores: int | None = None) -> tuple[TargetSpec, Any]:
    """(the spec with ``native`` resolved and, for llvm, ``num_cores`` where it names none; the
    tvm.target.Target); InputError when TVM refuses it."""
    if isinstance(spec, str):
        spec = parse_target(spec)
    spec = with_num_cores(resolve_host_cpu(spec, host_cpu()), num_cores) if spec.kind == "llvm" else spec
    try:
        target = tvm.target.Target(spec.config)
    except (ValueError, TypeError, RuntimeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"TVM refuses --target {spec.text!r}: {first}",
                         hint='e.g. llvm, cuda, or {"kind": "llvm", "mcpu": "znver4"}') from None
    return spec, target


def check_runnable(spec: TargetSpec, target: Any) -> None:
    """InputError, in one line, when code for ``target`` cannot run on this machine."""
    kind = target.kind.name
    if kind in HOST_KINDS:
        if kind == "llvm" and not tvm.runtime.enabled("llvm"):
            raise InputError(f"target {spec.text!r} is not available here: this TVM was built without LLVM")
        triple = str(target.attrs.get("mtriple", "") or codegen.llvm_get_system_triple())
        if not host_arch_matches(triple):
            raise InputError(f"target {spec.text!r} is not available here: it compiles for {triple}, "
                             f"which this machine cannot run", hint="profile on that machine, or drop mtriple")
        return
    if not tvm.runtime.enabled(kind) or not tvm.device(kind, 0).exist:
        raise InputError(f"target {spec.text!r} is not available here: no {kind} device "
                         f"(tvm.device({kind!r}, 0) does not exist)", hint="use --target llvm")


def device_of(target: Any) -> Any:
    """The device a build for ``target`` runs on (device 0 of its kind)."""
    kind = target.kind.name
    return tvm.cpu(0) if kind in HOST_KINDS else tvm.device(kind, 0)


def runnable_target(text: str, num_cores: int | None = None) -> tuple[TargetSpec, Any]:
    """``--target`` parsed, resolved and checked runnable here: (spec, tvm Target)."""
    spec, target = tvm_target(text, num_cores)
    check_runnable(spec, target)
    return spec, target
