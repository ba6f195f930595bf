"""Tables fitted to 80 columns as a reviewer met them on a PyTorch H100 trace: CUDA kernels shown under one
shortened name, the launch table ranked by a figure it left out, the model list printed whole."""

from __future__ import annotations

import pytest
from rich.cells import cell_len

import layerperf
from layerperf.readers.detect import read_table
from layerperf.renderers import terminal
from layerperf.renderers.view import KEEP, Column, Section, View
from layerperf.renderers.views.analyze import kernels_view
from layerperf.renderers.views.columns import name_column
from layerperf.renderers.views.gpu import gpu_view
from layerperf.renderers.views.lists import models_view
from layerperf.util import units
from test_table_fit import DATA, legible, rows_of

H100 = DATA / "torch_resnet18_cuda" / "trace.json.gz"  # cuDNN's kernels: one unit each, alike but for tile sizes
TILE = "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize64x{}x32_warpgroupsize1x1x1_g1_" \
       "execute_segment_k_{}_kernel__5x_cudnn"
KERNELS = [TILE.format(64, "off"), TILE.format(128, "off"), TILE.format(256, "on")]


def _apart(view: View, width: int, key: str) -> list[str]:
    """The first section's cells of column ``key`` at ``width``: legible, the rows told apart (a name
    shown for one text only)."""
    section = view.sections[0]
    text = terminal.render(View(sections=(section,), doc=None), width=width)
    assert all(cell_len(line) <= width for line in text.splitlines()), text
    headers, rows = rows_of(text)
    column = next(c for c in section.columns if c.key == key)
    whole = [column.cell(r) for r in section.people_rows]
    shown = [row[headers.index(column.header)] for row in rows]
    for s, w in zip(shown, whole, strict=True):
        assert legible(s, w), (s, w)
    assert len(dict(zip(shown, whole, strict=True))) == len(set(whole)), [s for s in shown if shown.count(s) > 1]
    return shown


@pytest.mark.parametrize("width", [40, 48, 60, 80])
def test_names_alike_but_in_their_middle_stay_apart(width: int) -> None:
    # one unit each (no "." "/" ":"): cut in the middle, all three read sm90_xmma_fpr…el__5x_cudnn
    rows = [{"name": k, "us": 10.0 * i} for i, k in enumerate(KERNELS)]
    section = Section([name_column("name", "kernel"), Column("us", "time", priority=KEEP)], rows)
    shown = _apart(View(sections=(section,), doc=None), width, "name")
    assert len(set(shown)) == 3 and shown != KERNELS, shown
    assert all(s.startswith("sm90_") and s.endswith("_cudnn") for s in shown), shown  # what it is stays
    if width == 40:  # a third of 80: where they part is kept
        assert [("64x64x" in s, "64x128" in s, "64x256" in s) for s in shown] == [(1, 0, 0), (0, 1, 0), (0, 0, 1)]


def test_kernel_table_at_80_tells_every_kernel_apart() -> None:
    view = kernels_view(read_table(H100), top=0)
    shown = _apart(view, 80, "name")
    assert len(shown) == 16 and len(set(shown)) == 16, shown


def test_launch_view_at_80_tells_kernels_and_sequences_apart() -> None:
    view = gpu_view(read_table(H100), "launch", top=0)
    kernels = _apart(view, 80, "name")
    sequences = _apart(View(sections=view.sections[1:], doc=None), 80, "sequence")
    assert len(set(kernels)) == len(kernels) == 16 and len(set(sequences)) == len(sequences) == 13


@pytest.mark.parametrize("width", [80, 100, 120, 200])
def test_launch_table_shows_the_total_delay_it_is_ranked_by(width: int) -> None:
    view = gpu_view(read_table(H100), "launch", top=0)
    section = view.sections[0]
    text = terminal.render(View(sections=(section,), doc=None), width=width)
    headers, rows = rows_of(text)
    assert "delay total" in headers, headers
    totals = [r["delay_total_us"] for r in section.rows]
    assert totals == sorted(totals, reverse=True)
    at = headers.index("delay total")
    assert [row[at] for row in rows] == [units.duration_us(t) for t in totals]  # whole, in rank order
    for r in section.rows:  # the total is the mean over the launches, summed; the keys there were stay
        assert r["delay_total_us"] == pytest.approx(r["delay_mean_us"] * r["launches"])
        assert {"cpu_mean_us", "delay_median_us", "delay_max_us"} <= set(r)
    figures = [h for h in headers if h not in ("kernel", "launches", "CPU launch mean")]
    assert figures and all("delay" in h for h in figures), headers  # a delay header says so alone
    assert "by total launch delay" in " ".join(text.split())


def test_models_list_fits_the_terminal_naming_each_model_once() -> None:
    text = terminal.render(models_view(), width=80)
    lines = text.splitlines()
    assert lines and all(cell_len(line) <= 80 for line in lines), text
    for name in layerperf.models.zoo.names():
        assert text.count(f"{name}:") == 0 and sum(line.startswith(name + " ") for line in lines) == 1
    whole = terminal.render(models_view())  # piped: one line a model, for grep
    assert len(whole.splitlines()) == len(layerperf.models.zoo.names())


def test_telling_rows_apart_tries_few_rows_per_name(monkeypatch: pytest.MonkeyPatch) -> None:
    # a name is checked against the rows that share its kept start or end, found by binary search: a table
    # of a thousand alike kernel names takes a few checks per row, not one per other row (a million)
    from layerperf.renderers import distinct

    calls = 0
    real = distinct._matches

    def counted(shown: str, other: str) -> bool:
        nonlocal calls
        calls += 1
        return real(shown, other)

    monkeypatch.setattr(distinct, "_matches", counted)
    texts = [f"sm90_xmma_fprop_implicit_gemm_f16f16_tilesize{64 << (i % 3)}x64x32_warpgroupsize1x1x1_kernel_cudnn_{i}"
             for i in range(1000)]
    out = distinct.shortened(texts, 30)
    assert len(set(out)) == len(texts) and all(len(t) <= 30 for t in out)
    assert calls < 5 * len(texts), calls
