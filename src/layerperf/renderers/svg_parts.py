"""SVG written as text, element by element: what the memory pictures and the report's charts share.

A drawing keeps its elements as strings; each shape's attributes are written with the drawing's own
quote character and precision (the memory SVGs are standalone files written with single quotes, the
report's charts are inline in HTML), and every text is escaped by the drawing's escape function.
"""

from __future__ import annotations

from collections.abc import Callable


class Elements:
    """The element list of one drawing: ``rect``, ``line``, ``text`` and raw ``add``."""

    quote = '"'
    digits = 1  # decimals of coordinates
    min_height = 0.5  # px: a bar of a tiny value stays visible

    def __init__(self, esc: Callable[[object], str]) -> None:
        self.esc = esc
        self.parts: list[str] = []

    def add(self, element: str) -> None:
        self.parts.append(element)

    def _n(self, value: float) -> str:
        return f"{self.quote}{value:.{self.digits}f}{self.quote}"

    def _s(self, value: str) -> str:
        return f"{self.quote}{value}{self.quote}"

    def rect(self, x: float, y: float, w: float, h: float, fill: str, title: str = "", attrs: str = "") -> None:
        inner = f"<title>{self.esc(title)}</title>" if title else ""
        self.add(f"<rect x={self._n(x)} y={self._n(y)} width={self._n(max(w, 0.5))} "
                 f"height={self._n(max(h, self.min_height))} fill={self._s(fill)} {attrs}>{inner}</rect>")

    def line(self, x1: float, y1: float, x2: float, y2: float, stroke: str = "#333", attrs: str = "") -> None:
        self.add(f"<line x1={self._n(x1)} y1={self._n(y1)} x2={self._n(x2)} y2={self._n(y2)} "
                 f"stroke={self._s(stroke)} {attrs}/>")

    def text(self, x: float, y: float, text: str, attrs: str = "") -> None:
        self.add(f"<text x={self._n(x)} y={self._n(y)} {attrs}>{self.esc(text)}</text>")
