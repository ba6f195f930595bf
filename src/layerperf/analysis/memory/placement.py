"""Offline placement of buffers in one arena, as ONNX Runtime's memory pattern lays them out.

Every buffer's lifetime is known before the run, so offsets can be planned once: buffers are
taken largest first (then earliest, then longest-lived), and each goes into the smallest gap that
fits among the buffers already placed that are live at the same time, or on top of them.
Offsets are aligned as ONNX Runtime aligns planned buffers (64 bytes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

ALIGNMENT = 64


class Interval(Protocol):
    @property
    def nbytes(self) -> int: ...
    @property
    def first(self) -> int: ...
    @property
    def last(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Placement:
    """Offsets in input order, and the arena size they need."""

    offsets: tuple[int, ...]
    arena_bytes: int


def aligned(nbytes: int, alignment: int = ALIGNMENT) -> int:
    return -(-nbytes // alignment) * alignment


def _best_gap(busy: list[tuple[int, int]], size: int) -> int:
    """Offset of the smallest free gap of at least ``size`` bytes below/between ``busy`` ranges."""
    best: tuple[int, int] | None = None  # (gap, offset)
    top = 0
    for start, end in sorted(busy):
        gap = start - top
        if gap >= size and (best is None or gap < best[0]):
            best = (gap, top)
        top = max(top, end)
    return best[1] if best is not None else top


def place(blocks: Sequence[Interval], alignment: int = ALIGNMENT) -> Placement:
    """Best-fit offsets for ``blocks`` (anything with nbytes, first, last), in the same order."""
    order = sorted(range(len(blocks)), key=lambda i: (-blocks[i].nbytes, blocks[i].first,
                                                      blocks[i].first - blocks[i].last, i))
    offsets = [0] * len(blocks)
    placed: list[tuple[int, int, int, int]] = []  # (first node, last node, start offset, end offset)
    arena = 0
    for i in order:
        b = blocks[i]
        size = aligned(b.nbytes, alignment)
        if size == 0:
            continue
        busy = [(start, end) for first, last, start, end in placed if first <= b.last and b.first <= last]
        offsets[i] = _best_gap(busy, size)
        placed.append((b.first, b.last, offsets[i], offsets[i] + size))
        arena = max(arena, offsets[i] + size)
    return Placement(tuple(offsets), arena)
