"""figures.py, the one module of derived figures: unknown is NaN/None and never 0, the scalar and the
vectorized forms give the same figures, and the statistics are numpy's own to the last bit."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest

import layerperf
from layerperf.analysis import aggregate as analysis
from layerperf.bench.stats import deciles_us, describe
from layerperf.cost import Cost
from layerperf.data import calls, figures, table
from layerperf.data.calls import STRING_COLUMNS
from layerperf.data.metadata import Metadata, ModelInfo
from layerperf.data.profile import CounterInfo, Layer, Profile, Run, Span
from layerperf.renderers.output import print_profile
from layerperf.renderers.views import analyze as analyze_view
from layerperf.renderers.views import columns as layer_view

NAN = float("nan")


def _profile(durations_us: dict[str, list[int]], **layer_fields: dict[str, object]) -> Profile:
    """Layers named by ``durations_us``, each run once per listed duration (a layer with none never ran)."""
    layers = [Layer(name=name, op_type="Conv", **layer_fields.get(name, {})) for name in durations_us]  # type: ignore[arg-type]
    n_runs = max(len(d) for d in durations_us.values())
    runs = []
    for r in range(n_runs):
        t, spans = r * 10**9, []
        for i, durs in enumerate(durations_us.values()):
            if r < len(durs):
                spans.append(Span(i, t, durs[r] * 1000, 1))
                t += durs[r] * 1000
        runs.append(Run(r * 10**9, t - r * 10**9, spans))
    return Profile(metadata=Metadata(model=ModelInfo("fake")), layers=layers, runs=runs)


# -- empty inputs: unknown, not 0 -------------------------------------------------------------------
def test_the_distribution_of_no_duration_is_unknown_not_zero() -> None:
    d = figures.distribution([])
    assert d.n == 0
    for value in (d.total_us, d.mean_us, d.median_us, d.p90_us, d.min_us, d.max_us):
        assert math.isnan(value)
    for stat in figures.STATS:
        assert math.isnan(figures.statistic([], stat))
    assert math.isnan(figures.percentile([], 25))
    assert figures.known(figures.median([])) is None


def test_an_empty_group_is_unknown_and_leaves_the_others_alone() -> None:
    g = figures.groups(np.array([0, 0, 2, 2, 2]), 4)  # groups 1 and 3 are empty
    values = np.array([3.0, 1.0, 5.0, 7.0, 6.0])
    expected = {"total": [4, 18], "mean": [2, 6], "median": [2, 6], "min": [1, 5], "max": [3, 7],
                "p90": [np.percentile([3, 1], 90), np.percentile([5, 7, 6], 90)]}
    for stat, (first, third) in expected.items():
        got = figures.grouped(values, g, stat)
        assert got[0] == first and got[2] == third, stat
        assert np.isnan(got[1]) and np.isnan(got[3]), stat
    d = figures.distributions(values * 1000, g)
    assert d.n.tolist() == [2, 0, 3, 0] and np.isnan(d.median_us[1]) and d.total_us[2] == 18


def test_a_group_holding_an_unknown_value_is_unknown() -> None:
    g = figures.groups(np.array([0, 0, 1, 1]))
    values = np.array([1.0, NAN, 2.0, 4.0])
    for stat in figures.STATS:
        got = figures.grouped(values, g, stat)
        assert np.isnan(got[0]) and not np.isnan(got[1]), stat


def test_a_layer_that_never_ran_has_unknown_times_not_zero(tmp_path: Path) -> None:
    prof = _profile({"ran": [10, 20], "never": []})
    ran, never = prof.table()
    assert never["calls"] == 0
    for key in ("median_us", "mean_us", "p90_us", "min_us", "max_us", "share", "cum_share", "incl_median_us"):
        assert never[key] is None, key
    assert ran["share"] == 1.0 and ran["cum_share"] == 1.0 and ran["median_us"] == 15.0
    layerperf.save(prof, tmp_path)
    rows = {r["name"]: r for r in csv.DictReader(io.StringIO((tmp_path / "layers.csv").read_text()))}
    assert rows["never"]["median_us"] == "" and rows["never"]["share"] == ""
    assert float(rows["ran"]["share"]) == 1.0  # every digit: "1.0"


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv", "json"])
@pytest.mark.parametrize("durations", [{"ran": [10, 20], "never": []}, {"a": [0, 0], "b": [0, 0]}])
def test_a_profile_with_unknown_shares_prints_them_unknown_and_last(durations: dict[str, list[int]], fmt: str,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    print_profile(_profile(durations), top=None, fmt=fmt, written={})
    out = capsys.readouterr().out
    assert all(name in out for name in durations)
    if fmt == "json":
        shares = [r["share"] for r in json.loads(out)["layers"]]
        assert shares[-1] is None and all(x is None or x > 0 for x in shares)
    if fmt in ("table", "markdown"):
        assert "?" in out and "nan" not in out.lower()


# -- shares --------------------------------------------------------------------------------------
def test_the_share_of_an_all_zero_profile_is_unknown() -> None:
    zeros = np.zeros(3)
    assert np.isnan(figures.shares(zeros, 0.0)).all()
    assert np.isnan(figures.cumulative_shares(zeros, 0.0)).all()
    assert figures.share(0.0, 0.0) is None
    rows = _profile({"a": [0, 0], "b": [0, 0]}).table()
    assert [(r["share"], r["cum_share"]) for r in rows] == [(None, None), (None, None)]
    assert [r["median_us"] for r in rows] == [0.0, 0.0]  # a measured 0 µs is a time, not unknown


def test_cumulative_shares_run_in_the_order_given_and_skip_unknown_parts() -> None:
    part = np.array([1.0, 3.0, NAN, 4.0])
    np.testing.assert_array_equal(figures.cumulative_shares(part, 8.0), [1 / 8, 4 / 8, NAN, 1.0])
    ranked = np.argsort(-part, kind="stable")  # 4, 3, 1, then the unknown
    np.testing.assert_array_equal(figures.cumulative_shares(part, 8.0, ranked), [1.0, 7 / 8, NAN, 4 / 8])


def test_layer_cumulative_share_ranks_by_total_and_analyze_keeps_table_order() -> None:
    prof = _profile({"small": [1, 1], "big": [6, 6], "mid": [3, 3]})
    rows = {r["name"]: r for r in prof.table()}
    assert rows["big"]["cum_share"] == pytest.approx(0.6)
    assert rows["mid"]["cum_share"] == pytest.approx(0.9)
    assert rows["small"]["cum_share"] == pytest.approx(1.0)
    cum = analysis.numeric_columns(analysis.aggregate(calls.from_profile(prof)))["cum_share"]
    np.testing.assert_allclose(cum, np.cumsum([0.1, 0.6, 0.3]))  # execution order, not ranked


# -- rates, intensity, counts per FLOP -------------------------------------------------------------
def test_a_rate_needs_a_known_amount_and_a_time_above_zero() -> None:
    assert figures.rate(None, 1e-3) is None
    assert figures.rate(1000, 0.0) is None
    assert figures.rate(1000, -1e-6) is None
    assert figures.rate(1000, None) is None
    assert figures.rate(0, 1e-3) == 0.0  # no work done is a rate of 0, a known figure
    assert figures.rate(1000, 1e-3) == 1e6
    got = figures.rates(np.array([NAN, 1000.0, 1000.0]), np.array([1.0, 0.0, 2.0]))
    assert np.isnan(got[:2]).all() and got[2] == 500.0


def test_intensity_with_zero_or_unknown_bytes_is_unknown() -> None:
    assert figures.intensity(100, 0) is None
    assert figures.intensity(100, None) is None
    assert figures.intensity(None, 10) is None
    assert figures.intensity(100, 8) == 12.5
    assert Cost(100, 4, 4).intensity == 12.5 and Cost(100, 0, 0).intensity is None


def test_counts_per_flop_need_a_flop() -> None:
    assert figures.per_flop(50.0, 0) is None
    assert figures.per_flop(50.0, None) is None
    assert figures.per_flop(None, 10) is None
    assert figures.per_flop(50.0, 100) == 0.5


def test_counter_per_flop_columns_exist_only_where_the_layer_has_flops() -> None:
    prof = _profile({"conv": [10, 10], "reshape": [1, 1]},
                    conv={"flops": 200, "counters": {"task-clock": [100.0, 300.0, 200.0]}},
                    reshape={"flops": 0, "counters": {"task-clock": [5.0, 7.0]}})
    prof.counters = CounterInfo(events={}, passes=3)
    conv, reshape = prof.table()
    assert conv["task-clock"] == 200.0 and conv["task-clock_per_flop"] == 1.0
    assert reshape["task-clock"] == 6.0 and "task-clock_per_flop" not in reshape


# -- one definition: scalar and vector forms, numpy's statistics -----------------------------------
@pytest.mark.parametrize("seed", range(5))
def test_scalar_and_vector_forms_agree(seed: int) -> None:
    rng = np.random.default_rng(seed)
    amount = rng.uniform(0, 1e9, 40)
    amount[rng.random(40) < 0.2] = NAN
    time_s = rng.uniform(-1e-3, 1e-2, 40)
    time_s[::7] = 0.0
    pairs = [(figures.rates, figures.rate), (figures.intensities, figures.intensity),
             (figures.per_flops, figures.per_flop)]
    for vector, scalar in pairs:
        column = vector(amount, time_s)
        for i in range(40):
            a = None if np.isnan(amount[i]) else float(amount[i])
            assert scalar(a, float(time_s[i])) == figures.known(column[i]), (vector.__name__, i)
    shares = figures.shares(amount, 5e9)
    assert [figures.share(None if np.isnan(a) else a, 5e9) for a in amount] == [figures.known(s) for s in shares]

    sizes = rng.integers(0, 12, 15)
    d_ns = rng.uniform(1e3, 1e6, int(sizes.sum()))
    g = figures.groups(np.repeat(np.arange(15), sizes), 15)
    columns = figures.distributions(d_ns, g)
    start = 0
    for i, n in enumerate(sizes.tolist()):
        one = figures.distribution(d_ns[start:start + n])
        start += n
        got = columns.at(i)
        assert got.n == one.n == n
        for key in ("total_us", "mean_us", "median_us", "p90_us", "min_us", "max_us"):
            x, y = getattr(got, key), getattr(one, key)
            assert (math.isnan(x) and math.isnan(y)) if n == 0 else x == pytest.approx(y, rel=1e-15), key


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 10, 11, 97, 1000])
def test_median_and_percentiles_are_numpys_to_the_last_bit(n: int) -> None:
    values = np.random.default_rng(n).lognormal(3, 1, n)
    assert figures.median(values) == float(np.median(values))
    for pct in (10, 25, 50, 75, 90, 99):
        assert figures.percentile(values, pct) == float(np.percentile(values, pct)), pct
    d = figures.distribution(values * 1000)
    us = values * 1000 / 1e3
    assert (d.median_us, d.p90_us, d.min_us, d.max_us) == (np.median(us), np.percentile(us, 90), us.min(), us.max())
    assert d.mean_us == pytest.approx(us.mean(), rel=1e-12) and d.total_us == pytest.approx(us.sum(), rel=1e-12)


def test_bench_statistics_come_from_figures() -> None:
    ns = [1000.0, 1200.0, 900.0, 5000.0, 1100.0, 1050.0]
    st = describe(ns)
    d = figures.distribution(ns)
    assert (st.median_us, st.p90_us, st.mean_us, st.min_us, st.max_us) == (
        d.median_us, d.p90_us, d.mean_us, d.min_us, d.max_us)
    assert (st.q1_us, st.q3_us) == (figures.percentile(np.asarray(ns) / 1e3, 25),
                                    figures.percentile(np.asarray(ns) / 1e3, 75))
    assert deciles_us(ns) == tuple(float(x) for x in np.percentile(np.asarray(ns) / 1e3, [10, 50, 90]))
    assert deciles_us([]) is None


# -- names -------------------------------------------------------------------------------------------
def test_one_name_inside_the_code_the_published_names_at_the_edge() -> None:
    """analyze's self time is ``self_us`` inside the code and ``time_us`` in what it publishes (rows, JSON,
    CSV, --order-by), the layer table's ``median_us``; both under the header "self time", every other
    column the same."""
    layer_keys = [c.key for c in layer_view.LAYER_COLUMNS]
    analyze_keys = [c.key for c in analyze_view.ANALYZE_COLUMNS]
    assert (layer_keys[0], analyze_keys[0]) == ("median_us", "time_us") and layer_keys[1:] == analyze_keys[1:]
    assert [c.header for c in layer_view.LAYER_COLUMNS] == [c.header for c in analyze_view.ANALYZE_COLUMNS]
    assert analysis.SELF_US in analysis.NUMERIC_COLUMNS and "time_us" not in analysis.NUMERIC_COLUMNS
    published = {*analysis.orderable(calls.empty()), *STRING_COLUMNS}
    assert set(analyze_keys) <= published and "median_us" in table.COLUMNS and "time_us" not in table.COLUMNS
    b = calls.TableBuilder()
    b.extend([b.ident("a", "Relu", "CPU", "", "")] * 2, [2.0, 4.0])
    by_name = analysis.aggregate(b.build({}), "name", "sum")
    (row,) = analysis.rows(by_name)
    assert row["time_us"] == 6.0 and analysis.SELF_US not in row
    assert analysis.resolve_column(by_name, "time_us") == (analysis.SELF_US, None)
