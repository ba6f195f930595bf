"""``layerperf diff A B`` on two constructed traces with known per-node times."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from layerperf.cli import main


def _trace(path: Path, nodes: list[tuple[str, str, float]], runs: int = 2) -> Path:
    events, t = [], 0.0
    for _ in range(runs):
        for name, op, dur in nodes:
            events.append({"ph": "X", "name": name, "pid": 1, "tid": 1, "ts": t, "dur": dur, "args": {"op_type": op}})
            t += dur
    path.write_bytes(orjson.dumps({"traceEvents": events}))
    return path


@pytest.fixture()
def pair(tmp_path: Path) -> tuple[Path, Path]:
    a = _trace(tmp_path / "a.json", [("conv", "Conv", 40), ("relu", "Relu", 10), ("old", "Add", 5)])
    b = _trace(tmp_path / "b.json", [("conv", "Conv", 20), ("relu", "Relu", 12), ("new", "Add", 3)], runs=4)
    return a, b


def _diff(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["diff", *argv, "--format", "json"]) == 0
    doc: dict[str, Any] = orjson.loads(capsys.readouterr().out)
    return doc


def test_diff_by_name(pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    doc = _diff(capsys, str(pair[0]), str(pair[1]))
    rows = {r["key"]: r for r in doc["rows"]}
    conv = rows["conv"]
    assert (conv["time_a_us"], conv["time_b_us"], conv["delta_us"], conv["speedup"]) == (40.0, 20.0, -20.0, 2.0)
    assert (conv["calls_a"], conv["calls_b"]) == (2, 4)
    assert rows["old"]["only_in"] == "A" and (rows["old"]["calls_b"], rows["old"]["time_b_us"]) == (0, 0.0)
    assert rows["old"]["delta_us"] == -rows["old"]["time_a_us"] and rows["old"]["delta_pct"] == -1.0
    assert rows["new"]["only_in"] == "B" and rows["new"]["speedup"] is None and rows["new"]["delta_pct"] is None
    assert (rows["new"]["calls_a"], rows["new"]["time_a_us"]) == (0, 0.0)
    assert doc["rows"][0]["key"] == "conv"  # largest |delta| first
    totals = doc["totals"]
    assert (totals["time_a_us"], totals["time_b_us"]) == (55.0, 35.0)
    assert (totals["only_in_a"], totals["only_in_b"]) == (1, 1)


def test_diff_by_type_and_formats(pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    rows = {r["key"]: r for r in _diff(capsys, str(pair[0]), str(pair[1]), "--by", "type")["rows"]}
    assert rows["Add"]["time_a_us"] == 5.0 and rows["Add"]["time_b_us"] == 3.0 and rows["Add"]["only_in"] == ""
    assert main(["diff", str(pair[0]), str(pair[1]), "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("key,op_type,calls_a,calls_b,time_a_us")
    assert main(["diff", str(pair[0]), str(pair[1])]) == 0
    out = capsys.readouterr().out
    assert "speedup" in out and "x2.000" in out and "1 only in A, 1 only in B" in out
    assert main(["diff", str(pair[0]), str(pair[1]), "--format", "markdown", "--order-by", "key"]) == 0
    assert "| conv |" in capsys.readouterr().out


def test_diff_orders_ascending_with_a_plus(pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    def keys(order: str) -> list[str]:
        return [r["key"] for r in _diff(capsys, str(pair[0]), str(pair[1]), f"--order-by={order}")["rows"]]

    for column, figure in (("time_b_us", "time_b_us"), ("delta", "delta_us")):
        rows = _diff(capsys, str(pair[0]), str(pair[1]), "--order-by", f"+{column}")["rows"]
        values = [abs(r[figure]) if column == "delta" else r[figure] for r in rows]
        assert values == sorted(values), column
        assert keys(f"+{column}") == keys(column)[::-1] or len(set(values)) < len(values)
    assert keys("+key") == sorted(keys("key")) and keys("-key") == sorted(keys("key"), reverse=True)
    for order in ("key_b", "-key_b"):  # a row found in A only has no key_b: last, in either direction
        rows = _diff(capsys, str(pair[0]), str(pair[1]), f"--order-by={order}")["rows"]
        has = [bool(r["key_b"]) for r in rows]
        assert not all(has) and has == sorted(has, reverse=True), order


def test_diff_bad_input(pair: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"[{")
    assert main(["diff", str(pair[0]), str(bad)]) == 2
    assert main(["diff", str(pair[0]), str(pair[1]), "--order-by", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and "truncated" in err and "valid: delta" in err


def test_by_type_pairs_an_op_family_across_quantization(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _trace(tmp_path / "a.json", [("c1", "Conv", 40), ("c2", "FusedConv", 20), ("p", "MaxPool", 8),
                                     ("r", "ReorderOutput", 2)])
    b = _trace(tmp_path / "b.json", [("c1_quant", "QLinearConv", 15), ("c2_quant", "QLinearConv", 10),
                                     ("p", "NhwcMaxPool", 6), ("q", "QuantizeLinear", 1)])
    doc = _diff(capsys, str(a), str(b), "--by", "type")
    rows = {r["key"]: r for r in doc["rows"]}
    conv = rows["Conv"]
    assert (conv["op_type"], conv["op_type_b"], conv["match"]) == ("Conv/FusedConv", "QLinearConv", "family")
    assert (conv["time_a_us"], conv["time_b_us"], conv["calls_a"], conv["calls_b"]) == (60.0, 25.0, 4, 4)
    assert rows["MaxPool"]["match"] == "family" and rows["MaxPool"]["time_b_us"] == 6.0
    assert rows["ReorderOutput"]["only_in"] == "A" and rows["QuantizeLinear"]["only_in"] == "B"
    assert (doc["totals"]["matched"], doc["totals"]["only_in_a"], doc["totals"]["only_in_b"]) == (2, 1, 1)
    exact = _diff(capsys, str(a), str(b), "--by", "type", "--match", "exact")
    assert not any(r["key"] == "Conv" and r["time_b_us"] for r in exact["rows"])  # as they are: nothing pairs


def test_by_type_puts_gpt2s_conv1d_with_the_matmuls(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """GPT-2's Conv1D modules (a Hugging Face Linear) on the torch side, ONNX Runtime's MatMuls on the other:
    one MatMul family, as scope pairing pairs them; DynamicQuantizeLinear is a quantization, not a Linear."""
    a = _trace(tmp_path / "torch.json", [("h.0.attn.c_attn", "Conv1D", 30), ("h.0.mlp.c_fc", "Conv1D", 40),
                                         ("h.0.ln_1", "LayerNorm", 5)])
    b = _trace(tmp_path / "ort.json", [("/h.0/attn/c_attn/MatMul", "MatMul", 20),
                                       ("/h.0/mlp/c_fc/MatMul", "MatMul", 25),
                                       ("/h.0/ln_1/LayerNormalization", "LayerNormalization", 4),
                                       ("/q/DynamicQuantizeLinear", "DynamicQuantizeLinear", 3)])
    rows = {r["key"]: r for r in _diff(capsys, str(a), str(b), "--by", "type")["rows"]}
    matmul = rows["MatMul"]
    assert (matmul["op_type"], matmul["op_type_b"], matmul["match"]) == ("Conv1D", "MatMul", "family")
    assert (matmul["time_a_us"], matmul["time_b_us"]) == (70.0, 45.0)
    assert rows["QuantizeLinear"]["op_type_b"] == "DynamicQuantizeLinear" and "Linear" not in rows


def test_a_row_only_in_b_shows_its_name_on_bs_side(pair: tuple[Path, Path]) -> None:
    """`diff` (terminal and page share the view): a node found only in B is listed under "name in B", A's
    name and type cells blank; the JSON keeps its name as the row's key."""
    from layerperf.readers.detect import read_table
    from layerperf.renderers.views.diff import diff_view

    a, b = (read_table(p) for p in pair)
    section = diff_view(a, b).sections[0]
    headers = [c.header for c in section.columns]
    assert headers[:2] == ["name", "name in B"]
    shown = {r["key_b"] or r["key"]: r for r in section.people_rows}
    assert (shown["new"]["key"], shown["new"]["op_type"], shown["new"]["key_b"], shown["new"]["op_type_b"]) == \
        ("", "", "new", "Add")
    assert (shown["old"]["key"], shown["old"]["key_b"]) == ("old", "")  # only in A: B's side blank
    assert {r["key"] for r in section.rows if r["only_in"] == "B"} == {"new"}  # the row's identity, for JSON
    by_type = diff_view(a, b, by="type").sections[0]
    assert [c.header for c in by_type.columns][0] == "op family"


def test_diff_page_labels_op_families_and_b_only_rows(tmp_path: Path) -> None:
    from html.parser import HTMLParser

    from layerperf.renderers import html

    a = _trace(tmp_path / "a.json", [("c1", "Conv", 40), ("p", "MaxPool", 8)])
    b = _trace(tmp_path / "b.json", [("c1_quant", "QLinearConv", 15), ("p", "MaxPool", 6),
                                     ("q", "QuantizeLinear", 1)])
    page = html.html(a, b)
    chart = page[page.index('<svg id="breakdown"'):]
    chart = chart[:chart.index("</svg>")]
    assert "Conv family (Conv, QLinearConv)" in chart and "B (QLinearConv): " in chart
    assert ">MaxPool<" in chart  # the same type on both sides: its own name

    class Cells(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.rows: dict[str, list[str]] = {}
            self.headers: list[str] = []
            self.at: str | None = None
            self.cell = False

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            a = dict(attrs)
            if tag == "tr" and a.get("data-name") is not None:
                self.at = str(a["data-name"])
                self.rows[self.at] = []
            elif tag == "td" and self.at is not None:
                self.cell = True
                self.rows[self.at].append("")
            elif tag == "th" and a.get("data-key"):
                self.headers.append(str(a["data-key"]))

        def handle_endtag(self, tag: str) -> None:
            self.cell = self.cell and tag != "td"

        def handle_data(self, data: str) -> None:
            if self.cell and self.at is not None:
                self.rows[self.at][-1] += data

    doc = Cells()
    doc.feed(page[page.index('<table id="diff"'):])
    row = dict(zip(doc.headers, doc.rows["q"], strict=True))
    assert (row["key"], row["key_b"], row["op_type_b"], row["only_in"]) == ("", "q", "QuantizeLinear", "B")
