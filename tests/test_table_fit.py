"""Tables in a terminal of 80, 120 and 200 columns: the name and the ranked column always there and legible
(a shortened name keeps its start and its end, the ranked figures whole), nothing wider than the terminal,
what was left out said below; piped output whole (every column, every character)."""

from __future__ import annotations

import argparse
import importlib.util
from collections.abc import Sequence
from pathlib import Path

import pytest
from rich.cells import cell_len

import layerperf
from layerperf.analysis.gpu import VIEWS
from layerperf.analysis.memory.report import memory_report
from layerperf.cli import build_parser, main
from layerperf.cli.bench import _measure
from layerperf.readers.detect import read_table
from layerperf.renderers import markdown, terminal
from layerperf.renderers.distinct import shorten
from layerperf.renderers.fit import Layout
from layerperf.renderers.view import KEEP, Column, Section, View
from layerperf.renderers.views.analyze import analyze_view
from layerperf.renderers.views.bench import bench_view
from layerperf.renderers.views.diff import diff_view
from layerperf.renderers.views.gpu import gpu_view
from layerperf.renderers.views.memory import memory_view
from layerperf.renderers.views.profile import profile_view

DATA = Path(__file__).parent / "data"
SAVED = DATA / "traces_0_1" / "resnet18_counters_memory" / "trace.json"  # counters task-clock, page-faults
TORCH_TRACE = DATA / "torch_cpu" / "trace.json.gz"  # PyTorch profiler (kineto)
WIDTHS = (80, 120, 200)
FAST = ["--samples", "3", "--min-time", "50us", "--warmup-max", "0.05", "--no-overhead", "--speed-wait", "0"]


def rows_of(text: str) -> tuple[list[str], list[list[str]]]:
    """The first table's header cells and body rows (cells stripped), from the terminal's text."""
    lines = text.splitlines()
    head = next(line for line in lines if line.startswith("┃"))
    start = next(i for i, line in enumerate(lines) if line.startswith("┡"))
    end = next(i for i, line in enumerate(lines) if line.startswith("└"))

    def cells(line: str, bar: str) -> list[str]:
        return [c.strip() for c in line.strip(bar).split(bar)]

    return cells(head, "┃"), [cells(line, "│") for line in lines[start + 1:end]]


def legible(shown: str, whole: str) -> bool:
    """``shown`` is ``whole``, or ``whole`` with runs elided (``…``): what is left are pieces of ``whole``
    in order (its start and end where no ellipsis stands there), 8 characters at least."""
    if shown == whole:
        return True
    pieces = shown.split("…")
    if len(pieces) < 2 or len("".join(pieces)) < 8 or not whole.startswith(pieces[0]) \
            or not whole.endswith(pieces[-1]):
        return False
    at = len(pieces[0])
    for piece in pieces[1:-1]:
        found = whole.find(piece, at)
        if found < 0:
            return False
        at = found + len(piece)
    return len(whole) - len(pieces[-1]) >= at


def check_fits(view: View, width: int, name_key: str, ranked_key: str) -> str:
    """Render ``view``'s first section at ``width``; assert the name and the ranked column are there,
    every name legible, every ranked figure whole, and no line wider than the terminal."""
    section = view.sections[0]
    text = terminal.render(View(sections=(section,), doc=None), width=width)
    assert all(cell_len(line) <= width for line in text.splitlines()), text
    by_key = {c.key: c for c in section.columns}
    name_col, ranked_col = by_key[name_key], by_key[ranked_key]
    headers, rows = rows_of(text)
    assert name_col.header in headers and ranked_col.header in headers, (width, headers)
    at_name, at_ranked = headers.index(name_col.header), headers.index(ranked_col.header)
    assert len(rows) == len(section.people_rows)
    for row, people in zip(rows, section.people_rows, strict=True):
        assert legible(row[at_name], name_col.cell(people)), (width, row[at_name], name_col.cell(people))
        assert row[at_ranked] == ranked_col.cell(people), (width, row)
    return text


@pytest.fixture(scope="module")
def torch_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A torch-backend profile of a module named as Hugging Face names BERT's (encoder.layer.11.attention.
    self.query), with a perf counter where this machine counts one; saved, for analyze to read."""
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed (pip install 'layerperf[torch]')")
    import torch
    from torch import nn

    from layerperf import counters

    class SelfAttention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.query, self.key, self.value = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.query(x) + self.key(x) * self.value(x)

    class Chain(nn.Module):
        """Its children in turn (a ModuleList's modules one after the other)."""

        def __init__(self, children: dict[str, nn.Module]) -> None:
            super().__init__()
            for name, child in children.items():
                self.add_module(name, child)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for child in self.children():
                for module in child if isinstance(child, nn.ModuleList) else [child]:
                    x = module(x)
            return x

    layers = nn.ModuleList(Chain({"attention": Chain({"self": SelfAttention()})}) for _ in range(12))
    bert = Chain({"encoder": Chain({"layer": layers})})
    counting = [p.name for p in counters.probe_events() if p.ok and p.name == "task-clock"]
    prof = layerperf.profile((bert.eval(), torch.randn(2, 8)), backend="torch", warmup=0, runs=2, latency=False,
                             events=counting, passes=1)
    out = tmp_path_factory.mktemp("torch_profile")
    layerperf.save(prof, out)
    return out / "trace.json"


@pytest.mark.parametrize("width", WIDTHS)
def test_profile_table_fits(width: int) -> None:
    prof = layerperf.load(SAVED)
    view = profile_view(prof, top=None, fmt="table", written={}, peaks=None)
    text = check_fits(view, width, "name", "share")
    if width < 200:
        assert "left out to fit" in text and "in_shapes" in text.split("left out")[1]


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("trace", ["saved", "kineto", "torch"])
def test_analyze_table_fits(width: int, trace: str, request: pytest.FixtureRequest) -> None:
    path = {"saved": SAVED, "kineto": TORCH_TRACE}.get(trace) or request.getfixturevalue("torch_trace")
    table = read_table(path)
    check_fits(analyze_view(table, top=20, peaks=None), width, "name", "time_us")
    check_fits(analyze_view(table, top=20, order_by="calls", peaks=None), width, "name", "calls")
    if trace != "kineto":  # a layerperf trace: its counters are columns
        assert table.counters, table.meta


def test_long_names_are_shortened_in_the_middle_at_80_and_whole_at_200(torch_trace: Path) -> None:
    view = analyze_view(read_table(torch_trace), top=0, peaks=None)  # every row: which come first is timing
    narrow = check_fits(view, 80, "name", "time_us")
    assert "encoder.layer.1" in narrow and "…" in narrow and "shortened in the middle" in " ".join(narrow.split())
    wide = check_fits(view, 200, "name", "time_us")
    assert "encoder.layer.11.attention.self.query" in wide and "…" not in rows_of(wide)[1][0]


@pytest.mark.parametrize("width", WIDTHS)
def test_diff_table_fits(width: int, torch_trace: Path) -> None:
    check_fits(diff_view(read_table(SAVED), read_table(SAVED)), width, "key", "delta_us")
    torch_table = read_table(torch_trace)
    check_fits(diff_view(torch_table, torch_table, order_by="time_a"), width, "key", "time_a_us")


@pytest.mark.parametrize("width", WIDTHS)
def test_memory_tables_fit(width: int) -> None:
    view = memory_view(memory_report(layerperf.load(SAVED)), fmt="table")
    check_fits(view, width, "name", "bytes")


@pytest.fixture(scope="module")
def bench_results() -> list[object]:
    args = build_parser().parse_args(["bench", "Relu", "--input", "X=1x8", "--sweep", "X=1x8,1x16", "--threads",
                                      "1,2", *FAST])
    return _measure(args, None)


@pytest.mark.parametrize("width", WIDTHS)
def test_bench_table_fits(width: int, bench_results: Sequence[object]) -> None:
    view = bench_view(bench_results, swept=["X"])  # type: ignore[arg-type]
    check_fits(view, width, "in:X", "median_us")


def test_piped_output_is_whole() -> None:
    view = profile_view(layerperf.load(SAVED), top=None, fmt="table", written={}, peaks=None)
    section = view.sections[0]
    text = terminal.render(view)  # no width: a pipe, a file
    headers, rows = rows_of(text)
    assert headers == [c.header for c in section.columns]
    assert "…" not in text and "left out" not in text
    assert [r[headers.index("in_shapes")] for r in rows] == [str(r["in_shapes"]) for r in section.people_rows]


def test_the_cli_piped_prints_every_column(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(SAVED)]) == 0  # capsys: stdout is not a terminal
    headers, _ = rows_of(capsys.readouterr().out)
    assert {"provider", "in_shapes", "out_shapes", "task-clock", "page-faults"} <= set(headers)


def test_columns_picks_what_is_shown(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(SAVED), "--columns", "in_shapes,FLOPS"]) == 0
    headers, _ = rows_of(capsys.readouterr().out)
    assert headers == ["self time", "name", "FLOPS", "in_shapes"]  # the ranked and the name columns, then those
    assert main(["analyze", str(SAVED), "--columns", "in_shapes", "--format", "markdown"]) == 0
    assert capsys.readouterr().out.splitlines()[2].startswith("| self time | name | in_shapes |")


@pytest.mark.parametrize(("args", "message"), [
    (["--columns", "nope"], "--columns: no column 'nope' here"),
    (["--columns", "name", "--format", "csv"], "--columns shapes the table; --format csv carries every column"),
    (["--wide", "--format", "json"], "--wide shapes the table; --format json carries every column"),
])
def test_columns_and_wide_errors_are_one_line(args: list[str], message: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(SAVED), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err


def test_every_table_command_takes_columns_and_wide() -> None:
    parser = build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name in ("profile", "analyze", "diff", "memory", "bench", "events", "backends", "calibrate"):
        flags = {f for a in subs.choices[name]._actions for f in a.option_strings}
        assert {"--columns", "--wide"} <= flags, name


def test_empty_columns_go_first_and_kept_columns_never() -> None:
    columns = [Column("t", "time", priority=KEEP), Column("name", "name", str, "left", priority=KEEP, min_width=24),
               Column("zeros", "int ops", priority=1), Column("work", "work", priority=3)]
    rows = [{"t": 1.5, "name": f"block.{i}.attention.output.dense", "zeros": 0, "work": 10 * i} for i in range(3)]
    view = View(sections=(Section(columns=columns, rows=rows),), doc=None)
    text = terminal.render(view, width=48)
    headers, _ = rows_of(text)
    assert headers == ["time", "name", "work"]
    assert "left out to fit 48 columns: int ops (zeros)" in " ".join(text.split())


def test_shorten_keeps_start_and_end() -> None:
    assert shorten("encoder.layer.11.attention.self.query", 37) == "encoder.layer.11.attention.self.query"
    assert shorten("bert.encoder.layer.11.attention.self.query", 30) == "bert.encoder.layer…self.query"
    assert shorten("encoder.layer.9.attention.self.value", 26) == "encoder.layer.9…self.value"  # whole parts
    assert shorten("x" * 40, 11) == "xxxxx…xxxxx"  # no parts: characters
    assert shorten("abcdef", 1) == "…"


def test_markdown_and_txt_files_keep_every_column() -> None:
    view = profile_view(layerperf.load(SAVED), top=None, fmt="markdown", written={}, peaks=None)
    assert "in_shapes" in markdown.render(view) and "in_shapes" in terminal.render(view)


def test_picked_columns_that_cannot_fit_print_whole() -> None:
    # the README: picked columns are never left out; when they cannot fit, every cell prints whole and the
    # terminal wraps the lines (rich must not squeeze them: "12.400 ms" cut to "12.400", "GFLOP/s" to "GFLOP")
    view = profile_view(layerperf.load(SAVED), top=5, fmt="table", written={}, peaks=None)
    section = view.sections[0]
    picked = ("in_shapes", "out_shapes", "FLOPS", "bandwidth")
    text = terminal.render(View(sections=(section,), doc=None), width=80, layout=Layout(columns=picked))
    headers, rows = rows_of(text)
    by_header = {c.header: c for c in section.columns}
    assert headers[1] == "name" and len(headers) == 6, headers
    assert max(cell_len(line) for line in text.splitlines()) > 80  # whole: wider than the terminal
    for row, people in zip(rows, section.people_rows, strict=True):
        assert row == [by_header[h].cell(people) for h in headers]


@pytest.mark.parametrize("name", [v for v in VIEWS if v != "overlap"])  # overlap: one row of figures
def test_gpu_views_keep_what_tells_their_rows_apart_at_80(name: str) -> None:
    # the launch view at 80 columns once showed only numbers: its kernel names were left out to fit; the
    # V100 trace has copies and annotations, the H100 one neither
    trace = "torch_cuda" if name in ("memcpy", "annotations") else "torch_resnet18_cuda"
    view = gpu_view(read_table(DATA / trace / "trace.json.gz"), name, top=4)
    checked = 0
    for section in view.sections:
        if not section.people_rows:
            continue
        checked += 1
        first = section.columns[0]
        assert first.priority == KEEP, (name, first.key)
        text = terminal.render(View(sections=(section,), doc=None), width=80)
        headers, rows = rows_of(text)
        assert headers[0] == first.header and all(cell_len(line) <= 80 for line in text.splitlines()), text
        assert all(row[0] for row in rows)
    assert checked, name


def test_shape_groups_keep_their_shapes_at_80() -> None:
    view = analyze_view(read_table(TORCH_TRACE), by="shape", top=6)
    text = terminal.render(view, width=80)
    headers, rows = rows_of(text)
    assert "in_shapes" in headers and "name" in headers
    shown = [(row[headers.index("name")], row[headers.index("in_shapes")]) for row in rows]
    assert len(set(shown)) == len(shown)  # every row told apart from the others


@pytest.mark.parametrize("by", ["shape", "type"])
def test_a_group_by_type_keeps_its_type_at_80_columns(by: str) -> None:
    # grouped by type (and shapes), the name is "(2 names)" and the type says what the row is
    view = analyze_view(read_table(SAVED), by=by, top=20, peaks=None)
    text = terminal.render(view, width=80)
    header, _ = rows_of(text)
    assert "type" in header, text
