"""memory_flow.svg and memory_timeline.svg: the memory report as pictures, SVG written as text.

Both pictures put the execution order (node number, from 1) on the x axis. ``memory_flow.svg`` draws every
buffer as a block spanning its lifetime at the offset the simulated best-fit allocator gives it;
``memory_timeline.svg`` draws live tensor bytes node by node beside what the runtime held (arena
in use, resident memory growth), or, where the backend recorded its allocator's events (PyTorch),
the allocator's live bytes event by event with the module each event happened in. Hovering a block,
a node column or a stretch of events names it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import IO, TYPE_CHECKING

from layerperf.analysis.memory.report import memory_report
from layerperf.data.memory_report import OUTSIDE_NAME, Allocations, MemoryReport, PlacedBlock
from layerperf.data.profile import Profile
from layerperf.renderers.svg_parts import Elements
from layerperf.util import units

if TYPE_CHECKING:
    pass

FLOW_FILENAME = "memory_flow.svg"
TIMELINE_FILENAME = "memory_timeline.svg"

WIDTH, HEIGHT = 1200, 640
LEFT, RIGHT, TOP, BOTTOM = 90, 24, 64, 110  # margins around the plot area
FONT = "font-family='DejaVu Sans, Arial, sans-serif'"
KIND_COLORS = {"input": "#4c78a8", "output": "#54a24b", "code": "#9ecae9"}
# Distinct hues for the op types that produce the most bytes, in that order; the rest share grey.
PALETTE = ("#f58518", "#72b7b2", "#e45756", "#b279a2", "#eeca3b", "#9d755d", "#ff9da6", "#17becf", "#8c6d31",
           "#637939")
OTHER_COLOR = "#bab0ac"
CHAR_PX = 7.0  # average glyph width at font-size 12, for laying out the legend
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")


_XML = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&apos;"})


def esc(text: object) -> str:
    """Text made safe for XML content and attribute values (control characters dropped). Its own table, not
    ``xml.sax.saxutils.escape``: that module imports ``urllib.request`` (13 ms of every command's start)."""
    return _CONTROL.sub("", str(text)).translate(_XML)


class Canvas(Elements):
    """An SVG document built element by element; ``plot`` maps (node, bytes) to pixels."""

    quote, digits, min_height = "'", 2, 0.6

    def __init__(self, n_nodes: int, max_bytes: float, title: str, subtitle: str) -> None:
        super().__init__(esc)
        self.n = max(n_nodes, 1)
        self.max_bytes = max(max_bytes, 1.0)
        self.x0, self.x1 = LEFT, WIDTH - RIGHT
        self.y0, self.y1 = TOP, HEIGHT - BOTTOM
        self.height = HEIGHT  # grows when the legend needs more rows than the bottom margin holds
        self.parts = [
            "",  # the <svg> element and the background, written by render() once the height is known
            f"<title>{esc(title)}</title>",
            "",
            f"<text x='{LEFT}' y='24' font-size='16' font-weight='bold'>{esc(title)}</text>",
            f"<text x='{LEFT}' y='44' fill='#444'>{esc(subtitle)}</text>",
        ]

    @property
    def col(self) -> float:
        return (self.x1 - self.x0) / self.n

    def x(self, node: float) -> float:
        return self.x0 + node * self.col

    def y(self, nbytes: float) -> float:
        return self.y1 - nbytes / self.max_bytes * (self.y1 - self.y0)

    def path(self, points: Sequence[tuple[float, float]], stroke: str, extra: str = "") -> None:
        if points:
            d = "M" + " L".join(f"{x:.2f},{y:.2f}" for x, y in points)
            self.add(f"<path d='{d}' fill='none' stroke='{stroke}' {extra}/>")

    def axes(self, x_label: str, y_label: str) -> None:
        for value, label in byte_ticks(self.max_bytes):
            y = self.y(value)
            self.line(self.x0, y, self.x1, y, "#e5e5e5")
            self.text(self.x0 - 6, y + 4, label, "text-anchor='end' fill='#333'")
        for node in node_ticks(self.n):
            x = self.x(node + 0.5)
            self.line(x, self.y1, x, self.y1 + 4, "#333")
            self.text(x, self.y1 + 17, str(node + 1), "text-anchor='middle' fill='#333'")  # counted from 1
        self.line(self.x0, self.y1, self.x1, self.y1, "#333")
        self.line(self.x0, self.y0, self.x0, self.y1, "#333")
        self.text((self.x0 + self.x1) / 2, self.y1 + 36, x_label, "text-anchor='middle'")
        self.text(18, (self.y0 + self.y1) / 2, y_label,
                  f"text-anchor='middle' transform='rotate(-90 18 {(self.y0 + self.y1) / 2:.0f})'")

    def legend(self, entries: Sequence[tuple[str, str, str]]) -> None:
        """(kind, color, label) with kind "box" or "line" or "dash", laid out left to right."""
        x: float = self.x0
        y = HEIGHT - 36
        for kind, color, label in entries:
            width = 40 + CHAR_PX * len(label)
            if x + width > WIDTH - RIGHT and x > self.x0:
                x, y = self.x0, y + 20
            if kind == "box":
                self.rect(x, y - 10, 14, 12, color)
            else:
                self.line(x, y - 4, x + 18, y - 4, color, "stroke-width='2.5'" +
                          (" stroke-dasharray='6 4'" if kind == "dash" else ""))
            self.text(x + 22, y, label)
            self.height = max(self.height, y + 12)
            x += width

    def peak_marker(self, node: int, label: str) -> None:
        x = self.x(node + 0.5)
        self.line(x, self.y0, x, self.y1, "#d62728", "stroke-dasharray='4 3' stroke-width='1.5'")
        anchor = "end" if x > (self.x0 + self.x1) / 2 else "start"
        # A white halo keeps the label readable over blocks and lines.
        self.text(x + (-6 if anchor == "end" else 6), self.y0 + 14, label,
                  f"text-anchor='{anchor}' fill='#d62728' font-weight='bold' stroke='white' stroke-width='3' "
                  "paint-order='stroke'")

    def render(self) -> bytes:
        h = self.height
        self.parts[0] = (f"<svg xmlns='http://www.w3.org/2000/svg' width='{WIDTH}' height='{h}' "
                         f"viewBox='0 0 {WIDTH} {h}' {FONT} font-size='12'>")
        self.parts[2] = f"<rect width='{WIDTH}' height='{h}' fill='white'/>"
        return ("\n".join([*self.parts, "</svg>"]) + "\n").encode("utf-8")


def byte_ticks(max_bytes: float, target: int = 5) -> list[tuple[float, str]]:
    """Round tick values (1, 2, 2.5, 5 x 10^k in the largest fitting binary unit) up to ``max_bytes``."""
    unit, name = next(((u, n) for u, n in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))
                       if max_bytes >= u), (1, "B"))
    raw = max_bytes / unit / target
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    if name == "B":
        step = max(1, round(step))
    count = int(max_bytes / unit / step + 1e-9)
    return [(i * step * unit, f"{i * step:g} {name}") for i in range(count + 1)]


def node_ticks(n: int, target: int = 12) -> list[int]:
    step = max(1, math.ceil(n / target))
    nice = next(s for s in (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 10 ** 9) if s >= step)
    return list(range(0, n, nice))


def op_colors(rep: MemoryReport) -> dict[str, str]:
    """A colour for each of the op types whose outputs take the most bytes."""
    by_op: dict[str, int] = {}
    for b in rep.blocks:
        if b.kind == "activation":
            op = rep.nodes[b.first].op_type
            by_op[op] = by_op.get(op, 0) + b.nbytes
    ranked = sorted(by_op, key=lambda o: (-by_op[o], o))
    return dict(zip(ranked, PALETTE, strict=False))


def shade(color: str, index: int) -> str:
    """Every other block a little lighter, so neighbours of one colour stay apart."""
    if index % 2 == 0:
        return color
    r, g, b = (int(color[i:i + 2], 16) for i in (1, 3, 5))
    return "#{:02x}{:02x}{:02x}".format(*(c + (255 - c) * 35 // 100 for c in (r, g, b)))


def block_color(rep: MemoryReport, b: PlacedBlock, colors: dict[str, str], index: int) -> str:
    base = KIND_COLORS.get(b.kind) or colors.get(rep.nodes[b.first].op_type, OTHER_COLOR)
    return shade(base, index)


def _node_label(rep: MemoryReport, index: int) -> str:
    node = rep.nodes[index]
    return f"#{index + 1} {node.name} ({node.op_type})"  # counted from 1, as the terminal says "node 2 of 25"


def block_title(rep: MemoryReport, b: PlacedBlock) -> str:
    names = ", ".join(b.tensors)
    made = ("graph input" if b.kind == "input" else
            f"made by the model's code before {_node_label(rep, b.first)}" if b.kind == "code" else
            f"produced by {_node_label(rep, b.first)}")
    return (f"{names}: {units.binary(b.nbytes)} ({b.nbytes:,} bytes) at offset {b.offset:,}; {made}; "
            f"last used by {_node_label(rep, b.last)}" + ("; graph output" if b.kind == "output" else ""))


def flow_svg(rep: MemoryReport, model: str = "model") -> bytes:
    """Time x address: every buffer at its simulated offset over its lifetime."""
    arena = rep.simulated_arena_bytes
    c = Canvas(len(rep.nodes), arena * 1.06, f"{model}: memory flow",
               f"each block is a buffer over its lifetime, at the offset a best-fit plan gives it: arena "
               f"{units.binary(arena)}, live peak {units.binary(rep.peak_bytes)}; hover a block for its tensors")
    c.axes("execution order (node number)", "offset in the simulated arena")
    colors = op_colors(rep)
    for i, b in enumerate(rep.blocks):
        if b.nbytes:
            c.rect(c.x(b.first), c.y(b.offset + b.nbytes), (b.last - b.first + 1) * c.col,
                   b.nbytes / c.max_bytes * (c.y1 - c.y0), block_color(rep, b, colors, i), block_title(rep, b),
                   "stroke='white' stroke-width='0.4'")
    if rep.peak_index >= 0:
        y = c.y(rep.peak_bytes)
        c.line(c.x0, y, c.x1, y, "#333", "stroke-dasharray='6 4'")
        c.peak_marker(rep.peak_index, f"peak {units.binary(rep.peak_bytes)} at {_node_label(rep, rep.peak_index)}")
    others = any(b.kind == "activation" and rep.nodes[b.first].op_type not in colors for b in rep.blocks)
    c.legend([("box", KIND_COLORS["input"], "graph input"), ("box", KIND_COLORS["output"], "graph output")]
             + [("box", color, f"made by {op}") for op, color in colors.items()]
             + ([("box", OTHER_COLOR, "made by other ops")] if others else [])
             + ([("box", KIND_COLORS["code"], "made between layers")] if any(b.kind == "code" for b in rep.blocks)
                else [])
             + [("dash", "#333", "live peak")])
    return c.render()


def _series(values: Sequence[int | None], base: int) -> list[tuple[int, int]]:
    return [(k, v - base) for k, v in enumerate(values) if v is not None]


def _step_points(c: Canvas, series: Sequence[tuple[int, float]]) -> list[tuple[float, float]]:
    pts: list[tuple[float, float]] = []
    for k, v in series:
        y = c.y(v)
        pts += [(c.x(k), y), (c.x(k + 1), y)]
    return pts


def memory_timeline_svg(rep: MemoryReport, model: str = "model") -> bytes:
    """Bytes over the execution order: live tensors, arena in use and resident memory growth; the
    allocator's live bytes over its events instead where the report has them."""
    if rep.allocations is not None and rep.allocations.events:
        return allocation_timeline_svg(rep, rep.allocations, model)
    rt = rep.runtime
    arena_lines: list[tuple[str, list[tuple[int, int]]]] = []
    rss_lines: list[tuple[int, list[tuple[int, int]]]] = []
    if rt is not None and rt.arena_in_use_before_bytes is not None:
        for r, run in enumerate(rt.arena_runs):
            label = "first run, tensor by tensor" if r == 0 else f"run {r + 1}, planned pattern"
            arena_lines.append((label, _series(run.in_use_bytes, rt.arena_in_use_before_bytes)))
    if rt is not None and rt.rss_baseline_bytes is not None:
        base = rt.rss_baseline_bytes
        for r in range(len(rt.arena_runs)):
            rss_lines.append((r, [(s.node, s.rss_bytes - base) for s in rt.rss_samples if s.run == r]))
    values = [rep.peak_bytes, rep.simulated_arena_bytes]
    values += [v for _, s in arena_lines for _, v in s] + [v for _, s in rss_lines for _, v in s]
    top = max(values) * 1.08
    allocated = rep.max_allocated_bytes
    # A far larger "max allocated" (an arena's first chunk, say) would flatten every curve: name it instead.
    off_scale = allocated is not None and allocated > 2 * top
    if allocated is not None and not off_scale:
        top = max(top, allocated * 1.08)
    subtitle = (f"max used (live peak) {units.binary(rep.peak_bytes)}; max allocated "
                f"{units.binary(rep.max_allocated_bytes)} ({rep.max_allocated_source or 'not measured'}); "
                "hover a column for its node")
    c = Canvas(len(rep.nodes), top, f"{model}: memory timeline", subtitle)
    c.axes("execution order (node number)", "bytes")
    live = [(k, n.live_bytes) for k, n in enumerate(rep.nodes)]
    pts = _step_points(c, live)
    if pts:
        area = [(c.x0, c.y1), *pts, (pts[-1][0], c.y1)]
        c.add("<path d='M" + " L".join(f"{x:.2f},{y:.2f}" for x, y in area) + "' fill='#4c78a8' fill-opacity='0.3'/>")
        c.path(pts, "#4c78a8", "stroke-width='1.5'")
    colors = ("#f58518", "#b279a2", "#9d755d")
    legend = [("box", "#9fb7d3", "live tensors (max used)")]
    for (label, s), color in zip(arena_lines, colors, strict=False):
        c.path(_step_points(c, s), color, "stroke-width='1.5'")
        legend.append(("line", color, f"arena in use above its start, {label}"))
    for (r, s), color in zip(rss_lines, ("#e45756", "#72b7b2"), strict=False):
        c.path([(c.x(k + 1), c.y(v)) for k, v in s], color, "stroke-width='1.2' stroke-dasharray='2 2'")
        for k, v in s:
            c.add(f"<circle cx='{c.x(k + 1):.2f}' cy='{c.y(v):.2f}' r='1.8' fill='{color}'/>")
        legend.append(("dash", color, f"resident memory above baseline, run {r + 1}"))
    for value, color, label in ((rep.simulated_arena_bytes, "#333", "simulated best-fit arena"),
                                (None if off_scale else allocated, "#d62728", "max allocated")):
        if value:
            c.line(c.x0, c.y(value), c.x1, c.y(value), color, "stroke-dasharray='6 4'")
            legend.append(("dash", color, label))
    if off_scale:
        c.text(c.x1 - 4, c.y0 + 14, f"max allocated {units.binary(allocated)}: above this scale",
               "text-anchor='end' fill='#d62728'")
    _hover_columns(c, rep, arena_lines, rss_lines)
    if rep.peak_index >= 0:
        c.peak_marker(rep.peak_index, f"peak {units.binary(rep.peak_bytes)} at {_node_label(rep, rep.peak_index)}")
    c.legend(legend)
    return c.render()


def _module_label(rep: MemoryReport, allocs: Allocations, layer: int) -> str:
    if 0 <= layer < len(rep.nodes):
        return f"{rep.nodes[layer].name} ({rep.nodes[layer].op_type})"
    return OUTSIDE_NAME


def _stretches(layers: Sequence[int]) -> list[tuple[int, int, int]]:
    """Runs of consecutive events in one module: (first event, last event, layer)."""
    out: list[tuple[int, int, int]] = []
    for k, layer in enumerate(layers):
        if out and out[-1][2] == layer:
            out[-1] = (out[-1][0], k, layer)
        else:
            out.append((k, k, layer))
    return out


def allocation_timeline_svg(rep: MemoryReport, allocs: Allocations, model: str = "model") -> bytes:
    """The allocator's live bytes after each of its events over one pass, the peak and its module."""
    b = units.binary
    top = max(allocs.peak_live_bytes, rep.peak_bytes, 1) * 1.08
    subtitle = (f"{allocs.device} allocator, {allocs.events} events over one pass: {b(allocs.allocated_bytes)} "
                f"allocated, {b(allocs.freed_bytes)} freed; peak {b(allocs.peak_live_bytes)} above the pass's "
                "start; hover a stretch for its module")
    c = Canvas(allocs.events, top, f"{model}: memory timeline (allocator events)", subtitle)
    c.axes("allocator events, in order (allocations and frees)", "live bytes allocated in the pass")
    pts = _step_points(c, list(enumerate(allocs.live_bytes)))
    area = [(c.x0, c.y1), *pts, (pts[-1][0], c.y1)]
    c.add("<path d='M" + " L".join(f"{x:.2f},{y:.2f}" for x, y in area) + "' fill='#4c78a8' fill-opacity='0.3'/>")
    c.path(pts, "#4c78a8", "stroke-width='1.5'")
    legend = [("box", "#9fb7d3", "live bytes after each event (max allocated)")]
    if rep.peak_bytes:
        c.line(c.x0, c.y(rep.peak_bytes), c.x1, c.y(rep.peak_bytes), "#333", "stroke-dasharray='6 4'")
        legend.append(("dash", "#333", "live tensors between layers at their peak (max used)"))
    for first, last, layer in _stretches(allocs.layer):
        peak = max(allocs.live_bytes[first:last + 1])
        label = (f"events {first + 1}-{last + 1}: in {_module_label(rep, allocs, layer)}, live up to {b(peak)}, "
                 f"t = {allocs.t_ns[first] / 1e6:.3f}-{allocs.t_ns[last] / 1e6:.3f} ms")
        c.rect(c.x(first), c.y0, (last - first + 1) * c.col, c.y1 - c.y0, "white", label, "fill-opacity='0'")
    at = allocs.live_bytes.index(allocs.peak_live_bytes)
    c.peak_marker(at, f"peak {b(allocs.peak_live_bytes)} in {_module_label(rep, allocs, allocs.peak_layer)}")
    c.legend(legend)
    return c.render()


def _hover_columns(c: Canvas, rep: MemoryReport, arena_lines: list[tuple[str, list[tuple[int, int]]]],
                   rss_lines: list[tuple[int, list[tuple[int, int]]]]) -> None:
    arena = [dict(s) for _, s in arena_lines]
    rss = [dict(s) for _, s in rss_lines]
    for k, node in enumerate(rep.nodes):
        parts = [f"{_node_label(rep, k)}: live {units.binary(node.live_bytes)}, writes "
                 f"{units.binary(node.output_bytes)}, weights {units.binary(node.param_bytes)}"]
        parts += [f"arena in use (run {r + 1}) +{units.binary(a[k])}" for r, a in enumerate(arena) if k in a]
        parts += [f"resident (run {r + 1}) +{units.binary(s[k])}" for r, s in enumerate(rss) if k in s]
        if node.workspace_bytes:
            parts.append(f"workspace >= {units.binary(node.workspace_bytes)}")
        c.rect(c.x(k), c.y0, c.col, c.y1 - c.y0, "white", "; ".join(parts), "fill-opacity='0'")


def _report(profile: Profile) -> MemoryReport:
    return memory_report(profile)


def _model(profile: Profile) -> str:
    return profile.metadata.model.name


def write_flow(profile: Profile, f: IO[bytes]) -> None:
    f.write(flow_svg(_report(profile), _model(profile)))


def write_timeline(profile: Profile, f: IO[bytes]) -> None:
    f.write(memory_timeline_svg(_report(profile), _model(profile)))


def writers() -> dict[str, Callable[[Profile, IO[bytes]], None]]:
    """File name -> writer of the memory pictures (:mod:`layerperf.renderers.files` writes them)."""
    return {FLOW_FILENAME: write_flow, TIMELINE_FILENAME: write_timeline}
