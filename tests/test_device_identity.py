"""Outputs keep each device's identity and show its energy split (issue #33 point 6): ``device_rounds`` has the
device's catalogue ``profile`` and the energy parts ``e_static_j``, ``e_idle_j``; the run folder's ``fleet.csv``
has ``distance_m`` beside ``x_m, y_m``; the report sums energy by device type and part and names the physics."""

from __future__ import annotations

import html
import io
import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from edgefl.engine.clock import JobTimes
from edgefl.engine.records import device_block
from edgefl.errors import ScenarioError
from edgefl.learning.protocol import RoundWork
from edgefl.output.report import FIGURE_KEYS, build_figures, build_report
from edgefl.output.report_energy import DRAWN, ENERGY_PARTS, energy_by_type, energy_by_type_table
from edgefl.output.report_header import physics_line
from edgefl.output.results import write_run
from edgefl.run.fleet_export import fleet_frame, with_devices
from edgefl.run.load import load_scenario
from edgefl.run.runner import draw_devices, physics_of, run_scenario

NAN = math.nan
# six devices of a device table: a profile or none (drawn from the scenario's ranges), and a distance [m]
TABLE_PROFILES = ["jetson_nano", "", "raspberry_pi_4", "", "snapdragon_7_gen1", "jetson_nano"]
TABLE_DISTANCES = [60.0, 120.0, 180.0, 90.0, 150.0, 70.0]
SURROGATE = [  # surrogate learning, a downlink whose receiver draws 0.05 W (so downloads cost energy)
    "learning=surrogate", "checkpoint_every=0", "method.clients_per_round=3", "surrogate.model_parameters=1000",
    "channel.downlink.tx_power_dbm=30.0", "channel.downlink.bandwidth_mhz=0.2", "channel.downlink.rx_power_w=0.05",
]  # fmt: skip
PAPER_WORDS = ("Physics: the papers' idealised model (Shannon rate, dynamic CPU power only, radiated transmit "
               "power only, no circuit or idle power)")  # fmt: skip
REALISTIC_WORDS = ("Physics: realistic (truncated Shannon link, static + dynamic compute power, PA efficiency and "
                   "circuit power, downloads)")  # fmt: skip


def _table(path, *, distances=TABLE_DISTANCES):
    rows = ["device,profile,distance_m"]
    rows += [f"{i},{p},{'' if d is None else d}" for i, (p, d) in enumerate(zip(TABLE_PROFILES, distances))]
    path.write_text("\n".join(rows) + "\n")
    return path


# ------------------------------------------------------------------------------------------ the records


def _block(**parts):
    """Round 4's block of two jobs (devices 3 and 1) and one device that sat out (2), in a fleet of 4."""
    jobs = {"device": np.array([3, 1])}
    for name in ("cpu_hz", "width", "alpha", "beta", "bits_planned", "t_cmp_planned_s", "t_com_planned_s",
                 "e_cmp_planned_j", "e_com_planned_j"):  # fmt: skip
        jobs[name] = np.ones(2)
    two = np.ones(2)
    times = JobTimes(t_down_s=two, t_start_s=two, t_arrive_s=two, t_end_s=two, t_dl_s=two, t_cmp_s=two, t_com_s=two,
                     cmp_done_s=two, com_done_s=two, dl_done_s=two, kept_mask=np.ones(2, dtype=bool),
                     status=np.array(["kept", "kept"]))  # fmt: skip
    work = RoundWork(flops=two, bits=two, steps=np.ones(2, dtype=np.int64), losses=two, updates=[None, None])
    return device_block(
        r=4, jobs=jobs, skipped_device=np.array([2]), skipped_reason=np.array(["energy"], dtype=object), times=times,
        work=work, distance_m=np.array([30.0, 10.0, 20.0]), rate_bps=two, e_max_j=np.full(3, np.inf), t_max_s=None,
        e_cmp_j=np.array([1.5, 2.5]), e_com_j=two, e_down_j=two, extra={"own": np.array([7.0, 8.0])}, **parts,
    )  # fmt: skip


def test_device_block_records_profile_and_energy_parts_by_device():
    block = _block(profiles=np.array(["a", "b", "", "d"], dtype=object), e_static_j=np.array([0.25, 0.5]),
                   e_idle_j=np.array([0.125, 0.75]))  # fmt: skip
    # rows sorted by device: 1 (job 2), 2 (sat out), 3 (job 1)
    assert block["device"].tolist() == [1, 2, 3]
    assert block["profile"].tolist() == ["b", "", "d"]
    assert block["e_static_j"].tolist() == [0.5, 0.0, 0.25]
    assert block["e_idle_j"].tolist() == [0.75, 0.0, 0.125]
    assert block["e_cmp_j"].tolist() == [2.5, 0.0, 1.5]
    names = list(block)  # the three follow e_down_j, then the allocation's two, before the method's own columns
    assert names[names.index("e_down_j") + 1 :] == [
        "profile", "e_static_j", "e_idle_j", "bandwidth_hz", "tx_power_w", "own",
    ]  # fmt: skip


def test_device_block_defaults_are_no_profile_and_zero_joules():
    block = _block()
    assert block["profile"].tolist() == ["", "", ""]
    assert block["e_static_j"].tolist() == [0.0, 0.0, 0.0] and block["e_idle_j"].tolist() == [0.0, 0.0, 0.0]
    assert np.isnan(block["bandwidth_hz"]).all() and np.isnan(block["tx_power_w"]).all()  # not given: empty


# ------------------------------------------------------------------------------------------ whole runs


@pytest.mark.slow
def test_quickstart_profile_column_is_the_fleets_profile_row_by_row():
    sc = load_scenario("quickstart", ["rounds=3", "fleet.n_devices=8", *SURROGATE])
    dr = run_scenario(sc).device_rounds
    fleet_profiles = draw_devices(sc).fleet.profiles
    assert dr["profile"].tolist() == [fleet_profiles[d] for d in dr["device"]]
    assert set(dr["profile"]) <= set(sc.fleet.profiles)  # the preset's mix
    # the quickstart's realistic physics: the static part of each trained job's compute energy, no idle wait (FDMA)
    trained = dr["t_cmp_s"] > 0
    assert (dr.loc[trained, "e_static_j"] > 0).all() and (dr["e_static_j"] <= dr["e_cmp_j"]).all()
    assert (dr["e_idle_j"] == 0.0).all()


@pytest.fixture(scope="module")
def table_runs(tmp_path_factory):
    """A device table of six devices (profiles, two without; distances) run under FedAvg and FedBuff, each
    written as a run folder."""
    tmp = tmp_path_factory.mktemp("identity")
    table = _table(tmp / "fleet.csv")
    base = ["rounds=4", "fleet.profiles={}", f'fleet.devices="{table}"', 'channel.mobility="static"', *SURROGATE]
    out = {}
    for method in ("fedavg", "fedbuff"):
        sets = [*base, f"method.name={method}"] + (["method.fedbuff.buffer_size=2"] if method == "fedbuff" else [])
        result = run_scenario(load_scenario("quickstart", sets))
        out[method] = (result, write_run(result, tmp / method))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("method", ["fedavg", "fedbuff"])
def test_both_drivers_record_the_tables_profiles(table_runs, method):
    result, folder = table_runs[method]
    dr = result.device_rounds
    assert dr["profile"].tolist() == [TABLE_PROFILES[d] for d in dr["device"]]
    assert set(dr["device"][dr["profile"] == ""]) <= {1, 3} and (dr["profile"] == "").any()
    np.testing.assert_allclose(dr["distance_m"], [TABLE_DISTANCES[d] for d in dr["device"]], rtol=1e-12)  # static
    written = pd.read_csv(folder / "device_rounds.csv", keep_default_na=False)
    assert written["profile"].tolist() == dr["profile"].tolist()
    header = list(written.columns)
    assert header[header.index("e_down_j") + 1 : header.index("e_down_j") + 4] == ["profile", "e_static_j", "e_idle_j"]


@pytest.mark.slow
@pytest.mark.parametrize("method", ["fedavg", "fedbuff"])
def test_report_energy_split_is_the_columns_sums(table_runs, method):
    result, folder = table_runs[method]
    dr = pd.read_csv(folder / "device_rounds.csv")  # as a reader finds it: empty profiles are NaN
    # independently: pandas sums of the columns by profile
    kind = dr["profile"].fillna("drawn")
    expected = pd.DataFrame({
        "compute static": dr["e_static_j"].fillna(0).groupby(kind).sum(),
        "compute dynamic": (dr["e_cmp_j"].fillna(0) - dr["e_static_j"].fillna(0)).groupby(kind).sum(),
        "upload": dr["e_com_j"].fillna(0).groupby(kind).sum(),
        "download": dr["e_down_j"].fillna(0).groupby(kind).sum(),
        "idle": dr["e_idle_j"].fillna(0).groupby(kind).sum(),
    })  # fmt: skip
    got = energy_by_type(dr)
    present = set(kind)
    assert list(got.index) == sorted(present - {"drawn"}) + (["drawn"] if "drawn" in present else [])
    pd.testing.assert_frame_equal(got, expected.loc[got.index], check_names=False, rtol=1e-12)
    assert (got["download"] > 0).all()  # the constant downlink is charged
    # every joule the run charged is in the split once
    assert got.to_numpy().sum() == pytest.approx(float(result.rounds["energy_cum_j"].iloc[-1]), rel=1e-9)
    page = (folder / "report.html").read_text(encoding="utf-8")
    assert 'id="edgefl-energy-by-type"' in page and energy_by_type_table(got) in page
    assert html.escape(physics_line("realistic")) in page  # the quickstart runs under the realistic physics


# ------------------------------------------------------------------------------------------ fleet.csv


def test_fleet_csv_distance_is_hypot_of_x_y_without_a_table():
    frame = fleet_frame(load_scenario("quickstart", ["fleet.n_devices=8"]))
    cols = list(frame.columns)
    assert cols[cols.index("x_m") : cols.index("x_m") + 3] == ["x_m", "y_m", "distance_m"]
    np.testing.assert_array_equal(frame["distance_m"], np.hypot(frame["x_m"], frame["y_m"]))
    assert "profile" in cols


def test_fleet_csv_distance_is_the_tables_where_given(tmp_path):
    table = _table(tmp_path / "fleet.csv", distances=[*TABLE_DISTANCES[:3], None, *TABLE_DISTANCES[4:]])
    sc = load_scenario("quickstart", ["fleet.profiles={}", f'fleet.devices="{table}"'])
    frame = fleet_frame(sc)
    given = [0, 1, 2, 4, 5]
    np.testing.assert_array_equal(frame["distance_m"].iloc[given], [TABLE_DISTANCES[i] for i in given])
    assert frame["distance_m"].iloc[3] == np.hypot(frame["x_m"].iloc[3], frame["y_m"].iloc[3])  # drawn position
    np.testing.assert_allclose(frame["distance_m"], np.hypot(frame["x_m"], frame["y_m"]), rtol=1e-12)
    assert frame["profile"].tolist() == TABLE_PROFILES
    # the exported table (x, y and distance together) places every device exactly where it was
    again = fleet_frame(with_devices(sc, pd.read_csv(io.StringIO(frame.to_csv(index=False)))))
    for col in ("x_m", "y_m", "distance_m"):
        np.testing.assert_array_equal(again[col], frame[col])


@pytest.mark.parametrize(("text", "pattern"), [
    ("x_m,y_m,distance_m\n30,40,50.01\n", r"line 2 .*: distance_m 50\.01 m is not the distance of x_m, y_m "
                                          r"\(30, 40\) m, 50 m"),
    ("x_m,y_m,distance_m\n0,0,-1\n", r"column distance_m: '-1' is outside the allowed range \[0, inf\] m"),
    ("x_m,y_m,distance_m\n,,0.5\n", r"column distance_m: '0.5' is outside the allowed range \[1, 100000\] m"),
])  # fmt: skip
def test_a_distance_beside_x_y_must_agree_with_them(tmp_path, text, pattern):
    (tmp_path / "t.csv").write_text(text)
    with pytest.raises(ScenarioError, match=pattern):
        load_scenario("quickstart", [f'fleet.devices="{tmp_path / "t.csv"}"'])


def test_a_distance_beside_x_y_may_be_beyond_the_distance_columns_range(tmp_path):
    far = math.hypot(1e5, 1e5)  # 141 km: a corner of the coordinates' range, beyond distance_m's 100 km
    (tmp_path / "t.csv").write_text(f"x_m,y_m,distance_m\n1e5,1e5,{far!r}\n30,40,50.0005\n")
    sc = load_scenario("quickstart", [f'fleet.devices="{tmp_path / "t.csv"}"', "method.clients_per_round=1"])
    positions = draw_devices(sc).radio.positions_m
    np.testing.assert_array_equal(positions, [[1e5, 1e5], [30.0, 40.0]])  # x, y place the devices


# ------------------------------------------------------------------------------------------ the report


def _hand_device_rounds() -> pd.DataFrame:
    """Five rows, energies exact binary fractions [J]; device 1 has no profile and sat out in round 2."""
    rows = [  # round, device, profile, e_cmp, e_static, e_com, e_down, e_idle
        (1, 0, "jetson_nano", 1.0, 0.25, 0.5, 0.125, 0.0625),
        (1, 1, "", 2.0, 0.5, 0.25, 0.125, 0.0),
        (2, 0, "jetson_nano", 1.5, 0.5, 0.75, 0.25, 0.125),
        (2, 1, "", NAN, NAN, NAN, NAN, NAN),
        (2, 2, "raspberry_pi_4", 4.0, 1.0, 1.0, 0.5, 0.25),
    ]
    df = pd.DataFrame(rows, columns=["round", "device", "profile", "e_cmp_j", "e_static_j", "e_com_j", "e_down_j",
                                     "e_idle_j"])  # fmt: skip
    trained = df["e_cmp_j"].notna()
    return df.assign(trained=trained, arrived=trained, t_cmp_s=df["e_cmp_j"], t_com_s=df["e_com_j"],
                     t_start_s=0.0)  # fmt: skip


# by hand: static sums, dynamic = e_cmp - e_static summed, upload, download, idle [J]
HAND = pd.DataFrame(
    {"compute static": [0.75, 1.0, 0.5], "compute dynamic": [1.75, 3.0, 1.5], "upload": [1.25, 1.0, 0.25],
     "download": [0.375, 0.5, 0.125], "idle": [0.1875, 0.25, 0.0]},
    index=pd.Index(["jetson_nano", "raspberry_pi_4", DRAWN], name="device type"),
)  # fmt: skip


def _rounds() -> pd.DataFrame:
    return pd.DataFrame({"round": [1, 2], "sim_time_s": [1.0, 2.0], "round_time_s": [1.0, 1.0],
                         "energy_cum_j": [4.0, 8.0], "test_accuracy": [0.5, 0.75]})  # fmt: skip


def test_energy_by_type_by_hand():
    got = energy_by_type(_hand_device_rounds())
    assert tuple(got.columns) == ENERGY_PARTS
    pd.testing.assert_frame_equal(got, HAND, rtol=0, atol=0)
    # read back from CSV (an empty profile is NaN there): the same
    back = pd.read_csv(io.StringIO(_hand_device_rounds().to_csv(index=False)))
    pd.testing.assert_frame_equal(energy_by_type(back), HAND, rtol=0, atol=0)


def test_energy_by_type_counts_missing_columns_as_zero():
    old = _hand_device_rounds().drop(columns=["profile", "e_static_j", "e_idle_j", "e_down_j"])
    got = energy_by_type(old)
    assert list(got.index) == [DRAWN]
    assert got.loc[DRAWN].tolist() == [0.0, 8.5, 2.5, 0.0, 0.0]  # all compute is dynamic: 1 + 2 + 1.5 + 4


def test_energy_by_type_figure_and_table_show_the_numbers():
    figures = build_figures(_rounds(), _hand_device_rounds())
    assert tuple(figures) == FIGURE_KEYS and FIGURE_KEYS[-1] == "energy_by_type"
    fig = figures["energy_by_type"]
    assert fig.layout.barmode == "stack"
    for trace, part in zip(fig.data, ENERGY_PARTS):
        assert trace.name == part and list(trace.x) == list(HAND.index)
        assert list(trace.y) == HAND[part].tolist()
    page = build_report(_rounds(), _hand_device_rounds(), title="t")
    table = energy_by_type_table(HAND)
    assert table in page
    assert "<tr><th>jetson_nano</th><td>0.75</td><td>1.75</td><td>1.25</td><td>0.375</td><td>0.1875</td>" \
           "<td>4.312</td></tr>" in table  # fmt: skip  # 4.3125 J at 4 significant digits
    assert "<tr><th>all devices</th><td>2.25</td><td>6.25</td><td>2.5</td><td>1</td><td>0.4375</td><td>12.44</td>" \
           "</tr>" in table  # fmt: skip


# ------------------------------------------------------------------------------------------ the header


def test_physics_line_for_both_values():
    assert physics_line("paper") == PAPER_WORDS
    assert physics_line("realistic") == REALISTIC_WORDS
    assert physics_line(None) == PAPER_WORDS  # a scenario without the field
    assert physics_line("other") == "Physics: other"


def test_physics_is_read_defensively_from_the_scenario():
    sc = load_scenario("quickstart")
    assert physics_of(sc) == (getattr(sc, "physics", None) or "paper")  # "paper" until the scenario has the field
    assert physics_of(SimpleNamespace()) == "paper"
    assert physics_of(SimpleNamespace(physics=None)) == "paper"
    assert physics_of(SimpleNamespace(physics="realistic")) == "realistic"


@pytest.mark.parametrize(("physics", "words"), [("paper", PAPER_WORDS), ("realistic", REALISTIC_WORDS)])
def test_report_header_shows_the_physics(physics, words):
    page = build_report(_rounds(), _hand_device_rounds(), title="t", physics=physics_line(physics))
    assert f'<p class="note physics">{html.escape(words)}</p>' in page
    assert "Physics:" not in build_report(_rounds(), _hand_device_rounds(), title="t")
