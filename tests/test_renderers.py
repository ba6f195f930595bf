"""Renderers: every view in every format, the same rows in each, and the format picked by --format or
by the --output file's suffix (an unknown suffix or a disagreeing --format: one line, exit 2)."""

from __future__ import annotations

import csv
import io
import math
import re
from pathlib import Path
from typing import Any

import orjson
import pytest

import layerperf
from layerperf.analysis.memory.report import memory_report
from layerperf.cli import main
from layerperf.readers.detect import read_table
from layerperf.renderers import csv as csv_format
from layerperf.renderers import json as json_format
from layerperf.renderers import markdown, output, terminal
from layerperf.renderers.view import Column, Note, Section, View
from layerperf.renderers.views.analyze import analyze_view
from layerperf.renderers.views.diff import diff_view
from layerperf.renderers.views.lists import backend_rows, backends_view, models_view
from layerperf.renderers.views.memory import memory_view
from layerperf.renderers.views.profile import profile_view

DATA = Path(__file__).parent / "data" / "traces_0_1"
SAVED = DATA / "resnet18_counters_memory" / "trace.json"  # counters, memory, padded NCHWc layers
LOOP = DATA / "loop" / "trace.json"  # control flow: nested calls, an inclusive column


def _trace(path: Path, nodes: list[tuple[str, str, float]]) -> Path:
    events, t = [], 0.0
    for _ in range(2):
        for name, op, dur in nodes:
            events.append({"ph": "X", "name": name, "pid": 1, "tid": 1, "ts": t, "dur": dur, "args": {"op_type": op}})
            t += dur
    path.write_bytes(orjson.dumps({"traceEvents": events}))
    return path


@pytest.fixture()
def many_ops(tmp_path: Path) -> Path:
    return _trace(tmp_path / "many.json", [(f"op{i}", "Relu" if i % 2 else "Conv", 10.0 + i) for i in range(25)])


@pytest.fixture()
def renamed_pair(tmp_path: Path) -> tuple[Path, Path]:
    """B's nodes renamed as a graph optimizer does (an _nchwc suffix), one new: the name-in-B columns show."""
    a = _trace(tmp_path / "a.json", [("conv", "Conv", 40), ("relu", "Relu", 10), ("add|x", "Add", 5)])
    b = _trace(tmp_path / "b.json", [("conv_nchwc", "Conv", 20), ("relu", "Relu", 12), ("reorder", "ReorderOutput", 3)])
    return a, b


# -- the same rows in every format ---------------------------------------------------------------

def _md_rows(text: str) -> list[list[str]]:
    """The cells of the first markdown table's body (header and alignment lines skipped)."""
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    return [[_md_unescape(c) for c in line[2:-2].split(" | ")] for line in lines[2:]]


def _md_unescape(cell: str) -> str:
    return re.sub(r"\\(.)", r"\1", cell)


def test_markdown_cells_escape_what_markdown_would_read() -> None:
    names = ("a|b", "void k<float>(float *a, float* b)", "<script>alert(1)</script>", "__init__", "a&lt;b",
             "[link](x)", "`code`", "back\\slash", "x\\|y")
    for text in names:
        cell = markdown.escape(text)
        bare = re.sub(r"\\.", "", cell)  # what is left once the escaped characters are taken out
        assert not set(bare) & set("|<>*`\\") and "](" not in bare and "&lt;" not in bare, (text, cell)
        assert _md_unescape(cell) == text
    note = Note("dropped an event named <b>bad</b> (e.g. '__x__')", "warning")
    text = markdown.render(View(sections=(Section(columns=[Column("n", "n")], rows=[{"n": 1}], notes=(note,)),),
                                doc=None))
    assert "\\<b\\>bad\\</b\\>" in text and "\\_\\_x\\_\\_" in text
    assert markdown.escape("in_shapes") == "in_shapes"  # inside a word _ is no emphasis: kept as written


def _same_number(cell: str, value: Any) -> bool:
    if value is None:
        return cell == ""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return cell == str(value)
    return math.isclose(float(cell), value, rel_tol=1e-5)


def _check_formats(view: View, json_rows: list[dict[str, Any]], blank: tuple[str, ...] = (),
                   blank_when_only_in_b: tuple[str, ...] = ()) -> None:
    """csv rows == json rows (6 significant digits) and markdown rows == json rows as people see them
    (``blank_when_only_in_b``: A's cells of a row found only in B, whose name and type show on B's side)."""
    section = view.sections[0]
    csv_rows = list(csv.DictReader(io.StringIO(csv_format.render(view))))
    md_rows = _md_rows(markdown.render(view))
    assert len(json_rows) == len(csv_rows) == len(md_rows) > 0
    for j, c, m in zip(json_rows, csv_rows, md_rows, strict=True):
        assert list(c) == section.csv_keys()
        assert all(_same_number(c[k], j.get(k)) for k in c), (c, j)
        for col, cell in zip(section.columns, m, strict=True):
            value = j.get(col.key)
            if col.key in blank_when_only_in_b and j.get("only_in") == "B":
                assert cell == "" and j.get(f"{col.key}_b") == value, col.key
                continue
            assert cell == (col.fmt(value) if value is not None else "" if col.key in blank else "?"), col.key


def test_analyze_rows_are_the_same_in_csv_json_and_markdown() -> None:
    for path in (SAVED, LOOP):
        table = read_table(path)
        for by in ("name", "type"):
            view = analyze_view(table, by=by, top=0)
            rows = orjson.loads(json_format.render(view))
            assert [r["name"] for r in rows] == [r["name"] for r in view.sections[0].rows]
            _check_formats(view, rows)


def test_diff_rows_are_the_same_in_csv_json_and_markdown(renamed_pair: tuple[Path, Path]) -> None:
    view = diff_view(read_table(renamed_pair[0]), read_table(renamed_pair[1]))
    doc = orjson.loads(json_format.render(view))
    assert {r["key_b"] for r in doc["rows"]} >= {"conv_nchwc", None}  # the name-in-B columns are shown
    assert "name in B" in [c.header for c in view.sections[0].columns]
    # no node in B is a blank cell for people, not "?" (unknown)
    _check_formats(view, doc["rows"], blank=("key_b", "op_type_b"), blank_when_only_in_b=("key", "op_type"))


def test_the_cli_prints_what_the_view_renders(renamed_pair: tuple[Path, Path],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    view = diff_view(read_table(renamed_pair[0]), read_table(renamed_pair[1]), by="type")
    for fmt, name in (("csv", "csv"), ("json", "json"), ("markdown", "markdown"), ("table", "table")):
        assert main(["diff", *map(str, renamed_pair), "--by", "type", "--format", fmt]) == 0
        assert capsys.readouterr().out == output.RENDERERS[name].render(view)


# -- every view renders in every format -----------------------------------------------------------

def _views(tmp_path: Path) -> dict[str, View]:
    prof = layerperf.load(SAVED)
    return {
        "profile": profile_view(prof, top=None, fmt="table", written={"trace.json": tmp_path / "trace.json"}),
        "profile-json": profile_view(prof, top=None, fmt="json", written={}),
        "profile+memory": profile_view(prof, top=3, fmt="table", written={}).then(memory_view(memory_report(prof))),
        "memory": memory_view(memory_report(prof), top=0, model="resnet18"),
        "analyze": analyze_view(read_table(LOOP)),
        "backends": backends_view(backend_rows()),
        "models": models_view(),
    }


@pytest.mark.parametrize("fmt", list(output.RENDERERS))
def test_every_view_renders_in_every_format(fmt: str, tmp_path: Path) -> None:
    for name, view in _views(tmp_path).items():
        text = output.RENDERERS[fmt].render(view)
        main_section = view.sections[0]
        if fmt == "json":
            assert orjson.loads(text) == orjson.loads(orjson.dumps(view.doc, option=orjson.OPT_SERIALIZE_NUMPY))
        elif fmt == "csv":
            rows = list(csv.reader(io.StringIO(text)))
            assert rows[0] == main_section.csv_keys() and len(rows) == len(main_section.rows) + 1, name
        else:
            for section in view.sections:
                assert section.title is None or section.title in text, name
                words = " ".join(text.split())  # a long note wraps in the terminal
                shown = markdown.escape if fmt == "markdown" else str  # markdown escapes its syntax
                assert all(" ".join(shown(n.plain()).split()) in words for n in section.notes), name


def test_a_profile_for_programs_keeps_every_layer_in_execution_order() -> None:
    prof = layerperf.load(SAVED)
    names = [layer.name for layer in prof.layers]
    rows = list(csv.DictReader(io.StringIO(csv_format.render(profile_view(prof, top=None, fmt="csv", written={})))))
    assert [r["name"] for r in rows] == names
    people = profile_view(prof, top=None, fmt="markdown", written={}).sections[0]
    assert len(people.rows) == min(20, len(names))
    shares = [r["share"] for r in people.rows]
    assert shares == sorted(shares, reverse=True)


def test_notes_print_as_written_not_as_markup() -> None:
    view = View(sections=(Section(columns=(), rows=(), notes=(Note("shape of [input_ids] unknown", "warning"),
                                                              Note("[bold]x[/bold] stays")),),), doc=None)
    text = terminal.render(view)
    assert "warning: shape of [input_ids] unknown" in text and "[bold]x[/bold] stays" in text
    assert "warning: shape of [input_ids] unknown" in markdown.render(view)


def test_models_list_is_one_plain_line_each(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines and all(line[14] == " " and line[:14].strip() in layerperf.models.zoo.names() for line in lines)
    assert not any("│" in line for line in lines)


# -- the format from the --output file's suffix -----------------------------------------------------

@pytest.mark.parametrize(("suffix", "fmt"), [(".csv", "csv"), (".json", "json"), (".md", "markdown"),
                                             (".txt", "table"), (".CSV", "csv")])
def test_the_output_suffix_picks_the_format(suffix: str, fmt: str, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / f"report{suffix}"
    assert main(["analyze", str(LOOP), "-o", str(out)]) == 0
    assert capsys.readouterr().out == ""  # the file has it all
    assert main(["analyze", str(LOOP), "--format", fmt]) == 0
    assert out.read_text() == capsys.readouterr().out
    assert main(["analyze", str(LOOP), "--format", fmt, "--output", str(out)]) == 0  # agreeing: fine


def test_the_suffix_chooses_how_many_rows(many_ops: Path, tmp_path: Path) -> None:
    assert main(["analyze", str(many_ops), "-o", str(tmp_path / "r.csv")]) == 0
    assert main(["analyze", str(many_ops), "-o", str(tmp_path / "r.md")]) == 0
    assert len(list(csv.DictReader((tmp_path / "r.csv").open()))) == 25  # programs: every row
    assert len(_md_rows((tmp_path / "r.md").read_text())) == 20  # people: the top 20


def _fails(capsys: pytest.CaptureFixture[str], argv: list[str], *words: str) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("layerperf: error:") and all(w in err[0] for w in words), err


@pytest.mark.parametrize("command", ["analyze", "diff"])
def test_unknown_suffix_and_disagreeing_format_are_one_line(command: str, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    traces = [str(LOOP)] if command == "analyze" else [str(LOOP), str(SAVED)]
    _fails(capsys, [command, *traces, "-o", str(tmp_path / "r.xlsx")], ".xlsx", ".csv", ".md")
    _fails(capsys, [command, *traces, "-o", str(tmp_path / "report")], "no suffix")
    _fails(capsys, [command, *traces, "--format", "json", "-o", str(tmp_path / "r.csv")], "--format json", ".csv")
    (tmp_path / "d.csv").mkdir()
    _fails(capsys, [command, *traces, "-o", str(tmp_path / "d.csv")], "directory")
    assert [p.name for p in tmp_path.iterdir()] == ["d.csv"] and not any((tmp_path / "d.csv").iterdir())


def test_a_failing_command_leaves_the_output_file_as_it_was(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.csv"
    out.write_text("before\n")
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [')
    _fails(capsys, ["analyze", str(bad), "-o", str(out)], "bad.json")
    assert out.read_text() == "before\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json", "r.csv"]  # no temporary left


def test_output_into_a_new_directory(tmp_path: Path) -> None:
    out = tmp_path / "new" / "dir" / "r.json"
    assert main(["analyze", str(LOOP), "-o", str(out)]) == 0
    assert isinstance(orjson.loads(out.read_bytes()), list)


def test_profile_output_beside_its_files(tiny_model_path: Path, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    def run(*argv: str) -> int:
        return main(["profile", str(tiny_model_path), "--runs", "3", "--warmup", "1", "--no-latency", *argv])

    _fails(capsys, ["profile", str(tiny_model_path), "--out", str(tmp_path / "d"), "-o", str(tmp_path / "r.html")],
           ".html")
    assert not (tmp_path / "d").exists()  # refused before profiling
    _fails(capsys, ["profile", str(tiny_model_path), "--format", "json", "-o", str(tmp_path / "r.md")], "markdown")
    assert run("--out", str(tmp_path / "d"), "-o", str(tmp_path / "r.csv")) == 0
    assert capsys.readouterr().out == ""
    with (tmp_path / "d" / "layers.csv").open(newline="") as f:
        layers = list(csv.reader(f))
    with (tmp_path / "r.csv").open(newline="") as f:
        assert list(csv.reader(f)) == layers  # every layer, in execution order, as layers.csv has them
    assert len(layers) > 1
    assert run("-o", str(tmp_path / "r.md")) == 0
    md = (tmp_path / "r.md").read_text()
    assert "layers by self %" in md and "backend: onnxruntime" in md and len(_md_rows(md)) >= 3
    assert run("-o", str(tmp_path / "r.json")) == 0
    assert set(orjson.loads((tmp_path / "r.json").read_bytes())) == {"summary", "layers", "files", "extra"}


@pytest.mark.parametrize(("command", "suffix"), [("profile", ".md"), ("profile", ".txt"), ("memory", ".txt"),
                                                ("memory", ".md")])
def test_a_saved_report_holds_the_view_and_the_terminal_what_was_written(
        command: str, suffix: str, tiny_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The "wrote" lines are no part of a report: with -o the file holds the tables and their notes, and stderr
    says every file written (the report's last); without -o they are below the tables, as ever."""
    argv = [command, str(tiny_model_path), "--runs", "2", "--warmup", "0", "--out", str(tmp_path / "d")]
    report = tmp_path / f"report{suffix}"
    assert main([*argv, "-o", str(report)]) == 0
    captured = capsys.readouterr()
    text = report.read_text()
    assert "wrote" not in text and "trace.json" not in text
    assert ("backend: onnxruntime" if command == "profile" else "tensors alive at the peak") in text
    said = captured.err.splitlines()
    files = sorted(p for p in (tmp_path / "d").iterdir())
    assert sorted(said[:-1]) == sorted(f"wrote {p}" for p in files) and said[-1] == f"wrote {report}"
    assert {"trace.json", "layers.csv"} <= {p.name for p in files} and not captured.out
    assert main(argv) == 0  # on the terminal: below the tables, on stdout
    captured = capsys.readouterr()
    assert all(f"wrote {p}" in captured.out for p in files) and "wrote" not in captured.err


def test_a_file_written_with_o_is_said_without_out_too(tiny_model_path: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """profile -o FILE writing no other file still says on stderr that it wrote FILE (as it always did); so
    does analyze -o."""
    report = tmp_path / "r.md"
    assert main(["profile", str(tiny_model_path), "--runs", "2", "--warmup", "0", "-o", str(report)]) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines()[-1] == f"wrote {report}" and report.is_file() and not captured.out
    trace = tmp_path / "t.json"
    trace.write_bytes(orjson.dumps([{"name": "a", "ph": "X", "ts": 1, "dur": 2, "pid": 1, "tid": 1}]))
    out = tmp_path / "a.csv"
    assert main(["analyze", str(trace), "-o", str(out)]) == 0
    assert capsys.readouterr().err.splitlines()[-1] == f"wrote {out}" and out.is_file()


def test_names_with_brackets_print_as_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # exporters write names such as blocks[0]/attn; rich would read [...] as markup and drop it
    events = [{"name": name, "ph": "X", "ts": 10 * i, "dur": 5, "pid": 1, "tid": 1, "cat": "op"}
              for i, name in enumerate(["blocks[0]/attn", "[red]conv[/red]", "[bold]"])]
    trace = tmp_path / "t.json"
    trace.write_bytes(orjson.dumps({"traceEvents": events}))
    assert main(["analyze", str(trace), "--top", "0"]) == 0
    out = capsys.readouterr().out
    for name in ("blocks[0]/attn", "[red]conv[/red]", "[bold]"):
        assert name in out


def test_svg_text_escapes_the_five_xml_characters_and_drops_control_characters() -> None:
    from layerperf.renderers.svg import esc

    assert esc("a&b<c>\"d'e\x01\x1f\tz") == "a&amp;b&lt;c&gt;&quot;d&apos;e\tz"
    assert esc("&amp;") == "&amp;amp;" and esc(3.5) == "3.5"
