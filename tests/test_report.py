"""Tests of edgefl.output.report on hand-made result tables whose expected figure data is computed by hand below.

Hand run: 3 rounds, devices 0, 1, 2. Round 2 is the longest (12.0 s) and the default timeline round; in it
every device starts computing at 0.5 s (after the broadcast):

    device  t_cmp  t_com  compute bar     upload bar       status
    0       3.0    2.0    0.5 -> 3.5      3.5 -> 5.5       arrived
    1       6.0    4.5    0.5 -> 6.5      6.5 -> 11.0      arrived  (straggler: latest arrival)
    2       8.0    5.0    0.5 -> 8.5      8.5 -> 13.5      dropped  (after the 11.5 s deadline; not the straggler)

Round 3: device 2 is infeasible (did not train, energy NaN). Energy per device summed over rounds [J]:
compute 0: 1.0+1.25+1.0 = 3.25, 1: 1.5+1.5+1.75 = 4.75, 2: 2.0+2.5 = 4.5;
upload  0: 0.5+0.5+0.25 = 1.25, 1: 0.75+1.0+0.5 = 2.25, 2: 0.25+0.75 = 1.0;
per round 6.0, 7.5, 3.5 J, cumulative 6.0, 13.5, 17.0 J (the rounds table agrees with the device table).
"""

from __future__ import annotations

import io
import math
import re

import numpy as np
import pandas as pd
import plotly
import pytest

from edgefl.output.report import (
    FIGURE_KEYS,
    ReportError,
    build_figures,
    build_report,
    default_timeline_round,
    find_straggler,
    summarize,
    write_report,
)

NAN = math.nan
TOL = 1e-12  # all expected values are exact binary fractions; only float summation order can differ

T_MAX_S = 11.5


def make_rounds() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "round": [1, 2, 3],
            "sim_time_s": [10.0, 22.0, 31.0],
            "round_time_s": [10.0, 12.0, 9.0],
            "energy_j": [6.0, 7.5, 3.5],
            "energy_cum_j": [6.0, 13.5, 17.0],
            "selected": [3, 3, 3],
            "arrived": [3, 2, 2],
            "dropped": [0, 1, 0],
            "bits_up": [3e6, 3e6, 2e6],
            "test_accuracy": [0.5, NAN, 0.75],
            "test_loss": [1.25, NAN, 0.5],
            "train_loss": [1.5, 1.0, 0.75],
            "wall_time_s": [0.1, 0.1, 0.1],
        }
    )


def _row(round_, device, *, trained=True, arrived=True, t_start=0.5, t_cmp=1.0, t_com=1.0, e_cmp=0.0, e_com=0.0,
         reason=""):
    t_arrive = t_start + t_cmp + t_com if trained else NAN
    return {
        "round": round_, "device": device, "selected": True, "trained": trained, "feasible": trained,
        "reason": reason, "arrived": arrived, "distance_m": 100.0, "rate_bps": 2e6, "cpu_hz": 1e9, "width": 1.0,
        "alpha": 1.0, "beta": 1.0, "local_steps": 5, "t_cmp_s": t_cmp if trained else NAN,
        "t_com_s": t_com if trained else NAN, "e_cmp_j": e_cmp if trained else NAN,
        "e_com_j": e_com if trained else NAN, "bits_planned": 1e6, "bits": 1e6 if trained else NAN,
        "t_max_s": T_MAX_S, "e_max_j": 10.0, "t_start_s": t_start if trained else NAN, "t_arrive_s": t_arrive,
    }


def make_device_rounds() -> pd.DataFrame:
    return pd.DataFrame(
        [
            _row(1, 0, t_cmp=2.0, t_com=1.0, e_cmp=1.0, e_com=0.5),
            _row(1, 1, t_cmp=3.0, t_com=2.0, e_cmp=1.5, e_com=0.75),
            _row(1, 2, t_cmp=4.0, t_com=3.0, e_cmp=2.0, e_com=0.25),
            _row(2, 0, t_cmp=3.0, t_com=2.0, e_cmp=1.25, e_com=0.5),
            _row(2, 1, t_cmp=6.0, t_com=4.5, e_cmp=1.5, e_com=1.0),
            _row(2, 2, t_cmp=8.0, t_com=5.0, e_cmp=2.5, e_com=0.75, arrived=False),
            _row(3, 0, t_cmp=2.0, t_com=1.0, e_cmp=1.0, e_com=0.25),
            _row(3, 1, t_cmp=2.5, t_com=1.5, e_cmp=1.75, e_com=0.5),
            _row(3, 2, trained=False, arrived=False, reason="energy budget"),
        ]
    )


@pytest.fixture(scope="module")
def figures():
    return build_figures(make_rounds(), make_device_rounds(), t_max_s=T_MAX_S)


def trace(fig, name):
    found = [t for t in fig.data if t.name == name]
    assert len(found) == 1, f"expected one trace named {name!r}, got {[t.name for t in fig.data]}"
    return found[0]


def bars(fig, name):
    """{y label: (start, end)} of a horizontal bar trace."""
    t = trace(fig, name)
    return {y: (b, b + x) for y, b, x in zip(t.y, t.base, t.x)}


def shape(fig, name):
    found = [s for s in fig.layout.shapes if s.name == name]
    assert len(found) == 1, f"expected one shape named {name!r}, got {[s.name for s in fig.layout.shapes]}"
    return found[0]


def annotation_texts(fig):
    return [a.text for a in fig.layout.annotations]


# ------------------------------------------------------------------------------------------ accuracy curves


def test_figure_keys_in_page_order(figures):
    assert tuple(figures) == FIGURE_KEYS


def test_accuracy_vs_time_skips_unevaluated_round(figures):
    (t,) = figures["accuracy_vs_time"].data
    assert list(t.x) == pytest.approx([10.0, 31.0], abs=TOL)
    assert list(t.y) == pytest.approx([0.5, 0.75], abs=TOL)
    assert "round 3" in t.hovertext[1] and "75.00%" in t.hovertext[1]
    assert figures["accuracy_vs_time"].layout.xaxis.title.text == "simulated time [s]"


def test_accuracy_vs_energy_uses_cumulative_energy(figures):
    (t,) = figures["accuracy_vs_energy"].data
    assert list(t.x) == pytest.approx([6.0, 17.0], abs=TOL)
    assert list(t.y) == pytest.approx([0.5, 0.75], abs=TOL)
    assert "[J]" in figures["accuracy_vs_energy"].layout.xaxis.title.text


def test_accuracy_vs_round(figures):
    (t,) = figures["accuracy_vs_round"].data
    assert list(t.x) == [1, 3]
    assert list(t.y) == pytest.approx([0.5, 0.75], abs=TOL)


def test_unsorted_rounds_are_drawn_in_round_order():
    shuffled = make_rounds().iloc[[2, 0, 1]]
    (t,) = build_figures(shuffled, make_device_rounds())["accuracy_vs_time"].data
    assert list(t.x) == pytest.approx([10.0, 31.0], abs=TOL)


# ------------------------------------------------------------------------------------------ device timeline


def test_timeline_hover_shows_the_allocated_band_power_and_frequency():
    """channel.allocation's knobs per job: 0.25 MHz, 125 mW, 1.5 GHz for device 0 of round 2 (hand values)."""
    dr = make_device_rounds()
    dr["bandwidth_hz"], dr["tx_power_w"], dr["cpu_hz"] = 0.25e6, 0.125, 1.5e9
    fig = build_figures(make_rounds(), dr, t_max_s=T_MAX_S)["timeline"]
    hover = trace(fig, "upload").hovertext[0]
    assert "band 0.25 MHz" in hover and "power 125 mW" in hover and "CPU 1.5 GHz" in hover


def test_default_timeline_round_is_the_longest_round():
    assert default_timeline_round(make_rounds(), make_device_rounds()) == 2


def test_timeline_bars_start_and_end_at_hand_times(figures):
    fig = figures["timeline"]
    assert bars(fig, "compute") == {"device 0": pytest.approx((0.5, 3.5)), "device 1": pytest.approx((0.5, 6.5))}
    assert bars(fig, "upload") == {"device 0": pytest.approx((3.5, 5.5)), "device 1": pytest.approx((6.5, 11.0))}
    assert bars(fig, "compute (dropped)") == {"device 2": pytest.approx((0.5, 8.5))}
    assert bars(fig, "upload (dropped)") == {"device 2": pytest.approx((8.5, 13.5))}
    assert all("dropped" in h for h in trace(fig, "upload (dropped)").hovertext)
    assert not any("dropped" in h for h in trace(fig, "upload").hovertext)
    assert "round 2" in fig.layout.title.text


def test_timeline_dropped_bars_look_different(figures):
    fig = figures["timeline"]
    assert trace(fig, "upload (dropped)").marker.color != trace(fig, "upload").marker.color
    assert trace(fig, "upload (dropped)").marker.pattern.shape == "/"


def test_straggler_is_latest_arrived_device_not_the_dropped_one(figures):
    assert find_straggler(make_device_rounds(), 2) == 1
    star = trace(figures["timeline"], "straggler")
    assert list(star.y) == ["device 1"]
    assert list(star.x) == pytest.approx([11.0], abs=TOL)
    assert any("straggler" in text and "device 1" in text for text in annotation_texts(figures["timeline"]))


def test_straggler_when_nobody_arrived_is_latest_overall():
    dr = make_device_rounds()
    dr.loc[dr["round"] == 2, "arrived"] = False
    assert find_straggler(dr, 2) == 2
    assert find_straggler(dr, 1) == 2  # round 1: device 2 arrives last at 0.5 + 4 + 3 = 7.5 s


def test_deadline_and_round_end_lines(figures):
    fig = figures["timeline"]
    deadline = shape(fig, "deadline")
    assert deadline.x0 == deadline.x1 == pytest.approx(T_MAX_S, abs=TOL)
    assert deadline.line.dash == "dash"
    end = shape(fig, "round end")
    assert end.x0 == end.x1 == pytest.approx(12.0, abs=TOL)


def test_no_deadline_line_without_t_max():
    fig = build_figures(make_rounds(), make_device_rounds())["timeline"]
    assert [s.name for s in fig.layout.shapes] == ["round end"]


@pytest.mark.parametrize("round_", [3, np.int64(3)])
def test_explicit_timeline_round_and_did_not_train_marker(round_):
    fig = build_figures(make_rounds(), make_device_rounds(), timeline_round=round_)["timeline"]
    assert set(bars(fig, "compute")) == {"device 0", "device 1"}
    idle = trace(fig, "did not train")
    assert list(idle.y) == ["device 2"] and "energy budget" in idle.hovertext[0]
    assert list(fig.layout.yaxis.categoryarray) == ["device 0", "device 1", "device 2"]
    assert "compute (dropped)" not in [t.name for t in fig.data]


def test_timeline_without_start_and_arrival_columns_starts_at_zero():
    dr = make_device_rounds().drop(columns=["t_start_s", "t_arrive_s"])
    fig = build_figures(make_rounds(), dr)["timeline"]
    assert bars(fig, "upload")["device 1"] == pytest.approx((6.0, 10.5))


@pytest.mark.parametrize("bad", [0, 4, 2.0, "2", True])
def test_unknown_timeline_round_raises(bad):
    with pytest.raises(ReportError, match=r"timeline_round=.* rounds present: 1\.\.3"):
        build_figures(make_rounds(), make_device_rounds(), timeline_round=bad)


@pytest.mark.parametrize("bad", [0.0, -1.0, NAN, math.inf, "soon"])
def test_bad_t_max_raises(bad):
    with pytest.raises(ReportError, match="t_max_s must be"):
        build_figures(make_rounds(), make_device_rounds(), t_max_s=bad)


# ------------------------------------------------------------------------------------------ energy


def test_device_energy_sums_equal_hand_sums(figures):
    fig = figures["device_energy"]
    assert fig.layout.barmode == "stack"
    compute, upload = trace(fig, "compute"), trace(fig, "upload")
    assert list(compute.x) == list(upload.x) == ["device 0", "device 1", "device 2"]
    assert list(compute.y) == pytest.approx([3.25, 4.75, 4.5], abs=TOL)
    assert list(upload.y) == pytest.approx([1.25, 2.25, 1.0], abs=TOL)
    assert fig.layout.yaxis.title.text == "energy [J]"
    assert sum(compute.y) + sum(upload.y) == pytest.approx(make_rounds()["energy_cum_j"].iloc[-1], abs=TOL)


def test_device_energy_counts_what_was_charged_even_without_training():
    dr = make_device_rounds()
    dr.loc[(dr["round"] == 3) & (dr["device"] == 2), ["e_cmp_j", "e_com_j"]] = [0.5, 0.25]
    fig = build_figures(make_rounds(), dr)["device_energy"]
    assert list(trace(fig, "compute").y) == pytest.approx([3.25, 4.75, 5.0], abs=TOL)
    assert list(trace(fig, "upload").y) == pytest.approx([1.25, 2.25, 1.25], abs=TOL)
    assert "trained in 2 round(s)" in trace(fig, "compute").hovertext[2]


# ------------------------------------------------------------------------------------------ edge cases


def test_no_evaluated_round_shows_annotation():
    rounds = make_rounds().assign(test_accuracy=NAN, test_loss=NAN)
    figs = build_figures(rounds, make_device_rounds())
    for key in ("accuracy_vs_time", "accuracy_vs_energy", "accuracy_vs_round"):
        assert len(figs[key].data) == 0
        assert "no evaluation yet" in annotation_texts(figs[key])
    assert summarize(rounds)["final_accuracy"] is None
    assert "no evaluation yet" in build_report(rounds, make_device_rounds(), title="t")


def test_empty_device_rounds():
    for empty in (pd.DataFrame(), make_device_rounds().iloc[0:0]):
        figs = build_figures(make_rounds(), empty, t_max_s=T_MAX_S)
        assert "no device rows for round 2" in annotation_texts(figs["timeline"])
        assert "no device rows yet" in annotation_texts(figs["device_energy"])
        assert len(figs["device_energy"].data) == 0
    assert "<h1>empty</h1>" in build_report(make_rounds(), pd.DataFrame(), title="empty")


def test_empty_run():
    figs = build_figures(pd.DataFrame(), pd.DataFrame())
    assert "no rounds yet" in annotation_texts(figs["timeline"])
    assert summarize(pd.DataFrame())["rounds"] == 0


def test_single_round():
    rounds = make_rounds().iloc[[0]]
    dr = make_device_rounds().query("round == 1")
    figs = build_figures(rounds, dr)
    assert list(figs["accuracy_vs_time"].data[0].x) == [10.0]
    assert find_straggler(dr, 1) == 2
    assert bars(figs["timeline"], "upload")["device 2"] == pytest.approx((4.5, 7.5))


def test_csv_round_trip_gives_same_figures(figures):
    def through_csv(df):
        buf = io.StringIO()
        df.to_csv(buf, index=False)
        buf.seek(0)
        return pd.read_csv(buf)

    again = build_figures(through_csv(make_rounds()), through_csv(make_device_rounds()), t_max_s=T_MAX_S)
    for key in FIGURE_KEYS:
        assert again[key].to_plotly_json() == figures[key].to_plotly_json(), key


def test_string_booleans_from_csv_are_parsed():
    dr = make_device_rounds()
    dr["arrived"] = dr["arrived"].map({True: "True", False: "False"})
    dr["trained"] = dr["trained"].map({True: "True", False: "False"})
    assert find_straggler(dr, 2) == 1


def test_missing_column_raises():
    with pytest.raises(ReportError, match=r"rounds is missing column\(s\) \['energy_cum_j'\]"):
        build_figures(make_rounds().drop(columns=["energy_cum_j"]), make_device_rounds())
    with pytest.raises(ReportError, match=r"device_rounds is missing column\(s\) \['e_com_j'\]"):
        build_figures(make_rounds(), make_device_rounds().drop(columns=["e_com_j"]))


# ------------------------------------------------------------------------------------------ summary and page


def test_summary_values():
    assert summarize(make_rounds()) == {
        "rounds": 3,
        "final_accuracy": 0.75,
        "final_accuracy_round": 3,
        "best_accuracy": 0.75,
        "best_accuracy_round": 3,
        "sim_time_s": 31.0,
        "energy_j": 17.0,
    }
    rounds = make_rounds()
    rounds.loc[2, "test_accuracy"] = 0.25
    s = summarize(rounds)
    assert (s["final_accuracy"], s["final_accuracy_round"]) == (0.25, 3)
    assert (s["best_accuracy"], s["best_accuracy_round"]) == (0.5, 1)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    path = tmp_path_factory.mktemp("report") / "run" / "report.html"
    out = write_report(path, make_rounds(), make_device_rounds(), title="quickstart <fedavg>", t_max_s=T_MAX_S)
    return path, out


def test_write_report_is_self_contained(written):
    path, out = written
    assert out == path
    page = path.read_text(encoding="utf-8")
    assert "plotly" in page.lower()
    assert not re.search(r"<script[^>]*\bsrc\s*=\s*[\"']?\s*(https?:)?//", page, flags=re.IGNORECASE)
    assert page.count(plotly.offline.get_plotlyjs()[:200]) == 1  # plotly.js inlined exactly once
    for key in FIGURE_KEYS:
        assert f'id="edgefl-{key.replace("_", "-")}"' in page
    assert "<h1>quickstart &lt;fedavg&gt;</h1>" in page
    assert "75.00% (round 3)" in page and "31 s" in page and "17 J" in page
    assert list(path.parent.iterdir()) == [path]  # no temporary file left behind


def test_report_is_deterministic(written):
    path, _ = written
    again = build_report(make_rounds(), make_device_rounds(), title="quickstart <fedavg>", t_max_s=T_MAX_S)
    assert again == path.read_text(encoding="utf-8")


def test_title_must_be_text():
    with pytest.raises(ReportError, match="title must be a str"):
        build_report(make_rounds(), make_device_rounds(), title=None)


def test_device_states_gantt_on_the_absolute_clock():
    # device 0: a job at 1 s (download 0.5 s, compute 1 s, upload to 3 s); another at 4 s lost offline at 4.5 s
    # during its compute; device 1: one job at 1 s, no download, compute 0.25 s, upload to 2 s
    dr = pd.DataFrame({
        "round": [1, 2, 1], "device": [0, 0, 1], "feasible": [True, True, True], "trained": [True, True, True],
        "arrived": [True, False, True], "reason": ["", "offline", ""], "t_down_s": [1.0, 4.0, 1.0],
        "t_start_s": [1.5, 4.5, 1.0], "t_cmp_s": [1.0, 0.25, 0.25], "t_com_s": [0.5, 0.0, 0.75],
        "t_end_s": [3.0, 4.5, 2.0], "e_cmp_j": [1.0, 0.1, 1.0], "e_com_j": [0.1, 0.0, 0.1],
    })  # fmt: skip
    rounds = pd.DataFrame({"round": [1, 2], "sim_time_s": [3.0, 4.5], "round_time_s": [3.0, 1.5],
                           "energy_cum_j": [2.2, 2.3], "test_accuracy": [0.5, 0.6]})  # fmt: skip
    fig = build_figures(rounds, dr)["device_states"]
    bars = {t.name: t for t in fig.data}
    assert list(bars["download"].base) == [1.0, 4.0, 1.0] and list(bars["download"].x) == [0.5, 0.5, 0.0]
    assert list(bars["compute"].base) == [1.5, 4.5, 1.0] and list(bars["compute"].x) == [1.0, 0.0, 0.25]
    assert list(bars["upload"].base) == [2.5, 4.5, 1.25] and list(bars["upload"].x) == [0.5, 0.0, 0.75]
    assert list(bars["lost (offline)"].x) == [4.5] and list(bars["lost (offline)"].y) == ["device 0"]
    empty = build_figures(rounds, dr.drop(columns=["t_down_s"]))["device_states"]
    assert not empty.data and "no absolute job times" in empty.layout.annotations[0].text


def test_staleness_histogram_only_for_async_runs():
    dr = make_device_rounds()
    rounds = make_rounds()
    assert "staleness" not in build_figures(rounds, dr)
    dr = dr.assign(staleness=[0.0, 1.0, 1.0, NAN, 3.0, 1.0, NAN, 0.0, 1.0])  # 9 rows: two 0s, four 1s, one 3
    figures = build_figures(rounds, dr)
    assert tuple(figures) == (*FIGURE_KEYS, "staleness")
    (bars,) = figures["staleness"].data
    assert list(bars.x) == [0, 1, 3] and list(bars.y) == [2, 4, 1]
