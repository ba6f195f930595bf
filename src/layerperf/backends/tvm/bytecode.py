"""The Relax VM's bytecode as ``VMExecutable.as_text()`` prints it, read back into instructions.

The instrument hook sees each call's callee and arguments but not the registers they came from or
went to; frees show only as ``vm.builtin.null_value`` with no argument. The bytecode names the
registers (``call vm.builtin.null_value in: dst: %3`` frees what ``%3`` held), and a straight-line
``main`` runs its call instructions in order, one hook call pair each.

The text looks like::

    @main:
      call  vm.builtin.alloc_storage in: %vm, c[2], i0, c[3], c[4] dst: %1
      call  conv2d           in: %0, c[6], %2 dst: %void
      ret   %6
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from layerperf.errors import BackendError

_CALL = re.compile(r"^\s*call\s+(\S+)\s+in:\s*(.*?)\s*dst:\s*(\S+)\s*$")
_RET = re.compile(r"^\s*ret\s+(\S+)\s*$")
_FUNC = re.compile(r"^@(\S+?):\s*$")


@dataclass(frozen=True, slots=True)
class Instr:
    """One call instruction: callee, argument operands (``%3`` registers, ``c[2]`` constants, ``i0``
    immediates, ``%vm``, ``%void``), and the register the result goes to (None: ``%void``)."""

    func: str
    args: tuple[str, ...]
    dst: str | None

    def registers(self) -> list[str]:
        """The argument registers (``%3``), not ``%vm``/``%void``."""
        return [a for a in self.args if is_register(a)]


@dataclass(frozen=True, slots=True)
class Function:
    """One VM function's call instructions in order, what it returns, and whether it branches."""

    name: str
    calls: tuple[Instr, ...]
    ret: str | None
    straight: bool  # no goto/if: the calls run in this order every time


def is_register(operand: str) -> bool:
    return operand.startswith("%") and operand[1:].isdigit()


def _operands(text: str) -> tuple[str, ...]:
    return tuple(a.strip() for a in text.split(",") if a.strip())


def parse(text: str) -> dict[str, Function]:
    """Every VM function of the text with a body (packed functions are declared without one)."""
    out: dict[str, Function] = {}
    name: str | None = None
    calls: list[Instr] = []
    ret: str | None = None
    straight = True

    def close() -> None:
        if name is not None:
            out[name] = Function(name, tuple(calls), ret, straight)

    for line in text.splitlines():
        head = _FUNC.match(line)
        if head:
            close()
            name, calls, ret, straight = head.group(1), [], None, True
            continue
        if name is None or not line.strip() or line.startswith("@"):
            continue
        call = _CALL.match(line)
        if call:
            dst = call.group(3)
            calls.append(Instr(call.group(1), _operands(call.group(2)), None if dst == "%void" else dst))
            continue
        done = _RET.match(line)
        if done:
            ret = done.group(1)
        else:
            straight = False  # goto, if: the calls no longer run in text order
    close()
    return out


def main_function(text: str) -> Function:
    """``main``'s instructions; BackendError when the text has none."""
    funcs = parse(text)
    if "main" not in funcs:
        raise BackendError("the compiled module has no VM function 'main' in its bytecode")
    return funcs["main"]
