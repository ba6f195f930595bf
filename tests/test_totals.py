"""Totals over layers (FLOPs, int ops, bytes) follow one rule: unknown when no layer's figure is known,
a lower bound naming the layers left out when only some are; never a 0 that was not counted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

import layerperf
from layerperf.analysis.summary import summary, work_line
from layerperf.data.figures import total, total_text
from layerperf.data.metadata import Metadata, ModelInfo
from layerperf.data.profile import Layer, Profile, Run, Span
from layerperf.data.sections import CostNesting
from layerperf.renderers.html import build
from layerperf.renderers.html.source import from_profile
from layerperf.renderers.output import print_profile

US = 1000


def _profile(**figures: Any) -> Profile:
    """Two layers run twice; ``figures`` gives each layer's flops/bytes_read/bytes_written/int_ops lists."""
    layers = [Layer(name=f"l{i}", op_type="Conv", **{k: v[i] for k, v in figures.items()}) for i in range(2)]
    runs = [Run(r * 100 * US, 20 * US, [Span(i, r * 100 * US + i * 10 * US, 10 * US, 1) for i in range(2)])
            for r in range(2)]
    return Profile(metadata=Metadata(model=ModelInfo("fake")), layers=layers, runs=runs)


def test_total_is_unknown_when_no_figure_is_known_and_a_bound_when_some_are() -> None:
    assert total([None, None], [1, 1]).value is None
    assert total([], []).value is None
    t = total([3.0, None, 4.0], [2, 1, 1], per=2)
    assert (t.value, t.unknown) == (5.0, 1)
    assert total_text(None, 2, str) == "?"
    assert total_text(5.0, 1, str) == "≥ 5.0 (1 layer unknown)"
    assert total_text(0.0, 0, str) == "0.0"  # a counted zero stays a zero


def test_summary_of_layers_with_unknown_bytes_says_unknown_not_zero(capsys: pytest.CaptureFixture[str]) -> None:
    prof = _profile(flops=[1000, 500], int_ops=[None, None])  # bytes never recorded (torch level 2)
    s = summary(prof)
    assert s["bytes"] is None and s["int_ops"] is None
    assert s["flops"] == 1500 and s["unknown_in_totals"] == {"flops": 0, "int_ops": 2, "bytes": 2}
    assert s["bytes_unknown_layers"] == 2
    assert work_line(s) == "1.50 kFLOP + ? int ops, ? moved"
    print_profile(prof, top=None, fmt="table", written={})
    out = capsys.readouterr().out
    assert "? moved" in out and "0 B moved" not in out
    print_profile(prof, top=None, fmt="json", written={})
    doc = orjson.loads(capsys.readouterr().out)
    assert doc["summary"]["bytes"] is None and doc["summary"]["int_ops"] is None  # null, not 0
    page = build.single(from_profile(prof), peaks=None)
    assert "? moved" in page and "0 B moved" not in page


def test_summary_with_some_figures_unknown_is_a_lower_bound() -> None:
    prof = _profile(flops=[1000, None], bytes_read=[64, None], bytes_written=[64, None], int_ops=[0, 0])
    s = summary(prof)
    assert (s["flops"], s["bytes"], s["int_ops"]) == (1000, 128, 0)
    assert s["unknown_in_totals"] == {"flops": 1, "int_ops": 0, "bytes": 1}
    # no integer work: no int ops
    assert work_line(s) == "≥ 1.00 kFLOP (1 layer unknown), ≥ 128 B (1 layer unknown) moved"


def test_totals_count_a_modules_own_work_where_costs_nest_as_self(tmp_path: Path) -> None:
    """A parent's figures are its own work (a torch module's) or its children's too (an ONNX Loop's):
    the totals count every layer in the first case, the layers that are no parent in the second."""
    layers = [Layer("block", "Block", flops=100, bytes_read=10, bytes_written=10),
              Layer("block.fc", "Linear", flops=1000, bytes_read=50, bytes_written=50, parent="block")]
    runs = [Run(0, 100, [Span(0, 0, 100, 1), Span(1, 10, 50, 1)])]
    own = Profile(metadata=Metadata(), layers=layers, runs=runs, cost_nesting=CostNesting.SELF)
    assert (summary(own)["flops"], summary(own)["bytes"]) == (1100, 120)
    inclusive = Profile(metadata=Metadata(), layers=layers, runs=runs)
    assert (summary(inclusive)["flops"], summary(inclusive)["bytes"]) == (1000, 100)
    layerperf.save(own, tmp_path / "p")
    assert layerperf.load(tmp_path / "p" / "trace.json").cost_nesting == "self"
    layerperf.save(inclusive, tmp_path / "q")
    assert layerperf.load(tmp_path / "q" / "trace.json").cost_nesting == "inclusive"
