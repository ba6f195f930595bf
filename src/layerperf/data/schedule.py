"""The schedule a compiled kernel got, as a typed record: tile sizes, loop order, where each block is
computed, and the parallel, vectorize and unroll choices (TVM's MetaSchedule picks them when it tunes).

Kept with the layer (:class:`~layerperf.data.extension.TvmKernel`), in trace.json and, as one line of
text (:meth:`KernelSchedule.compact`), in the per-layer records a dataset stores. An untuned kernel
has the :data:`DEFAULT` schedule and no other field. The trace reader that fills it is the TVM
backend's (:mod:`layerperf.backends.tvm.schedule`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

DEFAULT = "default schedule"
TUNED = "metaschedule"


@dataclass(frozen=True, slots=True)
class Tile:
    """One sampled split of a loop: its factors, outermost first."""

    block: str
    loop: str
    factors: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a block is computed: ``inline``/``reverse_inline``, or ``compute_at``/``reverse_compute_at`` a loop."""

    block: str
    how: str
    loop: str | None = None


@dataclass(frozen=True, slots=True)
class Loop:
    """A loop of the final kernel: name, extent and kind (serial, parallel, vectorized, unrolled)."""

    name: str
    extent: int | None
    kind: str


@dataclass(frozen=True, slots=True)
class KernelSchedule:
    """One kernel's schedule. ``source`` is :data:`DEFAULT` for an untuned build (then every other
    field is empty) or :data:`TUNED`; ``run_s`` is MetaSchedule's own measure of the chosen candidate."""

    func: str
    source: str = DEFAULT
    tiles: tuple[Tile, ...] = ()
    loop_order: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (block, its loops outermost first) per reorder
    placements: tuple[Placement, ...] = ()
    max_parallel_jobs_per_core: int | None = None  # meta_schedule.parallel
    max_vectorize_extent: int | None = None  # meta_schedule.vectorize
    unroll_max_step: int | None = None  # the sampled meta_schedule.unroll_explicit/implicit value
    unroll_explicit: bool | None = None
    loops: tuple[Loop, ...] = ()  # the final kernel's non-serial loops
    run_s: float | None = None
    trace: tuple[str, ...] = field(default=(), repr=False)

    @property
    def parallel_extent(self) -> int | None:
        """Iterations of the outermost parallel loop (the work split over threads); None when none."""
        return next((lp.extent for lp in self.loops if lp.kind == "parallel"), None)

    @property
    def vectorize_extent(self) -> int | None:
        return next((lp.extent for lp in self.loops if lp.kind == "vectorized"), None)

    def compact(self) -> str:
        """The schedule in one line, for a table cell or a dataset's text column:
        ``tiles=ff:2x8x4x1,yy:1x7x2x4;order=ff_0,yy_0,...;parallel=64;vectorize=16;unroll=64;inline=pad_temp;
        at=conv2d_nchw_global@xx_2`` — or ``default schedule``."""
        if self.source != TUNED:
            return self.source
        one_block = len({t.block for t in self.tiles}) <= 1
        parts = []
        if self.tiles:
            parts.append("tiles=" + ",".join(f"{t.loop if one_block else t.block + '.' + t.loop}:"
                                             f"{'x'.join(map(str, t.factors))}" for t in self.tiles))
        if self.loop_order:
            parts.append("order=" + ",".join(self.loop_order[-1][1]))
        for key, value in (("parallel", self.parallel_extent), ("vectorize", self.vectorize_extent),
                           ("unroll", self.unroll_max_step)):
            if value is not None:
                parts.append(f"{key}={value}")
        inline = [p.block for p in self.placements if p.how in ("inline", "reverse_inline")]
        at = [f"{p.block}@{p.loop}" for p in self.placements if p.loop is not None]
        if inline:
            parts.append("inline=" + ",".join(inline))
        if at:
            parts.append("at=" + ",".join(at))
        return ";".join(parts) or TUNED

    def to_json(self) -> dict[str, Any]:
        """As trace.json keeps it (plain lists and dicts)."""
        return {
            "func": self.func, "source": self.source,
            "tiles": [{"block": t.block, "loop": t.loop, "factors": list(t.factors)} for t in self.tiles],
            "loop_order": [{"block": b, "loops": list(ls)} for b, ls in self.loop_order],
            "placements": [{"block": p.block, "how": p.how, "loop": p.loop} for p in self.placements],
            "max_parallel_jobs_per_core": self.max_parallel_jobs_per_core,
            "max_vectorize_extent": self.max_vectorize_extent,
            "unroll_max_step": self.unroll_max_step, "unroll_explicit": self.unroll_explicit,
            "loops": [{"name": lp.name, "extent": lp.extent, "kind": lp.kind} for lp in self.loops],
            "parallel_extent": self.parallel_extent, "vectorize_extent": self.vectorize_extent,
            "run_s": self.run_s, "trace": list(self.trace),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> KernelSchedule:
        """What :meth:`to_json` wrote (the derived extents are recomputed, not read)."""
        return cls(
            func=str(d.get("func", "")), source=str(d.get("source", DEFAULT)),
            tiles=tuple(Tile(str(t["block"]), str(t["loop"]), tuple(int(f) for f in t["factors"]))
                        for t in d.get("tiles") or ()),
            loop_order=tuple((str(o["block"]), tuple(str(x) for x in o["loops"])) for o in d.get("loop_order") or ()),
            placements=tuple(Placement(str(p["block"]), str(p["how"]), _str(p.get("loop")))
                             for p in d.get("placements") or ()),
            max_parallel_jobs_per_core=_int(d.get("max_parallel_jobs_per_core")),
            max_vectorize_extent=_int(d.get("max_vectorize_extent")), unroll_max_step=_int(d.get("unroll_max_step")),
            unroll_explicit=None if d.get("unroll_explicit") is None else bool(d["unroll_explicit"]),
            loops=tuple(Loop(str(lp["name"]), _int(lp.get("extent")), str(lp["kind"])) for lp in d.get("loops") or ()),
            run_s=None if d.get("run_s") is None else float(d["run_s"]),
            trace=tuple(str(line) for line in d.get("trace") or ()))


def default_schedule(func: str) -> KernelSchedule:
    """An untuned kernel's record: the schedule TVM's pipeline gives it by default."""
    return KernelSchedule(func)


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def _str(value: Any) -> str | None:
    return None if value is None else str(value)
