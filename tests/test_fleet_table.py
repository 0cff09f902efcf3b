"""Device tables (``fleet.devices``): a user's own fleet runs, an exported fleet reruns identically, bad cells
fail naming the file's line and column, and the AnycostFL optimizer takes the same table."""

from __future__ import annotations

import gc
import json
import os
import pickle
import re
import subprocess
import sys
import weakref
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from edgefl.scenario.catalogue import catalogue
from edgefl.cli.fleet import write_table
from edgefl.errors import ScenarioError
from edgefl.run.fleet_export import fleet_frame, with_devices
from edgefl.fleet.build import placed_positions
from edgefl.scenario.device_table import table_of
from edgefl.run.runner import run_scenario
from edgefl.run.load import load_scenario, scenario_from_dict
from fleets import PAPER_QUICKSTART

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
NEAR = [50.0, 62.5, 75.0, 87.5, 100.0]  # [m], half the devices near the base station
EDGE = [540.0, 545.0, 550.0, 550.0, 549.0]  # [m], half at the 550 m cell edge
PROFILES = ["jetson_nano", "snapdragon_7_gen1"]


def _ten_devices(path: Path) -> Path:
    rows = ["device,distance_m,profile"]
    for i, d in enumerate(NEAR + EDGE):
        rows.append(f"{i},{d},{PROFILES[i % 2]}")
    path.write_text("\n".join(rows) + "\n")
    return path


def _tables_equal(a, b) -> None:
    pd.testing.assert_frame_equal(a.rounds.drop(columns=["wall_time_s"]), b.rounds.drop(columns=["wall_time_s"]))
    pd.testing.assert_frame_equal(a.device_rounds, b.device_rounds)


@pytest.mark.slow
def test_ten_device_table_runs_with_quickstart_with_each_devices_own_values(tmp_path):
    table = _ten_devices(tmp_path / "fleet.csv")
    sc = load_scenario("quickstart", [*PAPER_QUICKSTART, f'fleet.devices="{table}"', "rounds=1",
                                      "method.clients_per_round=10", 'channel.mobility="static"'])  # fmt: skip
    assert sc.fleet.n_devices == 10
    dr = run_scenario(sc).device_rounds.set_index("device")
    np.testing.assert_array_equal(dr["distance_m"].to_numpy(), NEAR + EDGE)
    for i in range(10):
        p = catalogue()[PROFILES[i % 2]]
        assert dr.loc[i, "cpu_hz"] == p.f_max_hz  # fedavg cpu_policy = "max"
        # compute power e_cmp / t_cmp = eps f^3 = the cited power (eps = P / f^3 at f = f_max)
        assert dr.loc[i, "e_cmp_j"] / dr.loc[i, "t_cmp_s"] == pytest.approx(p.power_w, rel=1e-9)
        # uplink power e_com / t_com = 23 dBm = 0.1995 W (UE power class 3)
        assert dr.loc[i, "e_com_j"] / dr.loc[i, "t_com_s"] == pytest.approx(0.199526231, rel=1e-8)
    frame = fleet_frame(sc)  # the fleet as a table: each device's own range and power
    np.testing.assert_array_equal(frame["f_min_hz"], [catalogue()[PROFILES[i % 2]].f_min_hz for i in range(10)])
    np.testing.assert_allclose(np.hypot(frame["x_m"], frame["y_m"]), NEAR + EDGE, rtol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("extra", [[], ["fleet.profiles={jetson_nano=0.3, dimensity_8100=0.7}"]])
def test_export_then_run_is_identical_to_the_drawn_run(tmp_path, extra):
    base = ["rounds=3", *extra]
    out = tmp_path / "fleet.csv"
    done = subprocess.run([sys.executable, "-m", "edgefl", "fleet", "quickstart", "--out", str(out), *sum(
        (["--set", s] for s in base), [])], capture_output=True, text=True, env=ENV)  # fmt: skip
    assert done.returncode == 0, done.stderr
    drawn = run_scenario(load_scenario("quickstart", base))
    _tables_equal(drawn, run_scenario(load_scenario("quickstart", [*base, f'fleet.devices="{out}"'])))
    # the same from a DataFrame, and from Parquet
    _tables_equal(drawn, run_scenario(with_devices(load_scenario("quickstart", base), pd.read_csv(out))))
    write_table(pd.read_csv(out), tmp_path / "fleet.parquet")
    parquet = tmp_path / "fleet.parquet"
    _tables_equal(drawn, run_scenario(load_scenario("quickstart", [*base, f'fleet.devices="{parquet}"'])))


@pytest.mark.slow
def test_a_bad_value_on_line_7_fails_naming_line_and_column(tmp_path):
    table = _ten_devices(tmp_path / "fleet.csv")
    lines = table.read_text().splitlines()
    lines[0] += ",f_max_ghz"
    lines = [lines[0]] + [row + "," for row in lines[1:]]
    lines[6] = lines[6] + "25"  # line 7 of the file: a 25 GHz CPU
    table.write_text("\n".join(lines) + "\n")
    (tmp_path / "sc.toml").write_text((Path(__file__).parents[1] / "scenarios/quickstart.toml").read_text()
                                      .replace("n_devices = 20", 'devices = "fleet.csv"'))  # fmt: skip
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "edgefl", "run", str(tmp_path / "sc.toml"), "--out", str(out)],
                          capture_output=True, text=True, env=ENV)  # fmt: skip
    assert done.returncode == 2
    err = done.stderr.strip()
    assert "\n" not in err and "Traceback" not in err
    assert "line 7 (line 1 is the header), column f_max_ghz: '25' is outside the allowed range [0.001, 10] GHz" in err
    assert not out.exists()  # nothing written


def test_parquet_and_dataframe_errors_name_the_row(tmp_path):
    frame = pd.DataFrame({"distance_m": [100.0, 200.0, 0.5], "tx_power_dbm": [23.0, 23.0, 23.0]})
    frame.to_parquet(tmp_path / "f.parquet", index=False)
    with pytest.raises(ScenarioError, match=r"row 3 \(row 1 is the first device\), column distance_m: 0\.5 is "
                                            r"outside the allowed range \[1, 100000\] m"):  # fmt: skip
        load_scenario("quickstart", [f'fleet.devices="{tmp_path / "f.parquet"}"'])
    with pytest.raises(ScenarioError, match=r"DataFrame row 2 .*column tx_power_dbm: 40\.0 is outside the allowed "
                                            r"range \[-50, 33\] dBm"):  # fmt: skip
        with_devices(load_scenario("quickstart"), pd.DataFrame({"tx_power_dbm": [20.0, 40.0]}))


@pytest.mark.parametrize(("text", "pattern"), [
    ("f_max_gz\n1\n", r"unknown column\(s\) 'f_max_gz' \(did you mean 'f_max_ghz'\?\); columns are f_min_hz"),
    ("distance_m,x_m,y_m\n100,1,1\n", r"line 2 .*: distance_m 100 m is not the distance of x_m, y_m \(1, 1\) m"),
    ("profile\niphone\n", r"line 2 \(line 1 is the header\), column profile: 'iphone' is not in the device catalogue"),
    ("f_min_ghz,f_max_ghz\n2.0,1.0\n", r"line 2 \(line 1 is the header\): f_min \(2 GHz\) exceeds f_max \(1 GHz\)"),
    ("device\n0\n0\n", r"line 3 \(line 1 is the header\), column device: 0 repeats an earlier row's device index"),
    ("n_samples\n1.5\n", "must be a whole number of samples"),
])  # fmt: skip
def test_table_mistakes_are_one_line_errors(tmp_path, text, pattern):
    (tmp_path / "t.csv").write_text(text)
    with pytest.raises(ScenarioError, match=pattern):
        load_scenario("quickstart", [f'fleet.devices="{tmp_path / "t.csv"}"'])


def test_the_table_sets_n_devices_and_a_different_explicit_n_devices_fails(tmp_path):
    _ten_devices(tmp_path / "t.csv")
    # the preset's own n_devices = 20 gives way to a table set on the command line; an equal value is accepted
    assert load_scenario("quickstart", [f'fleet.devices="{tmp_path / "t.csv"}"']).fleet.n_devices == 10
    same = load_scenario("quickstart", [f'fleet.devices="{tmp_path / "t.csv"}"', "fleet.n_devices=10"])
    assert same.fleet.n_devices == 10
    for order in (["fleet.n_devices=20", f'fleet.devices="{tmp_path / "t.csv"}"'],
                  [f'fleet.devices="{tmp_path / "t.csv"}"', "fleet.n_devices=20"]):  # fmt: skip
        with pytest.raises(ScenarioError, match=r"fleet\.n_devices=20 but the device table '.*t\.csv' has 10 device "
                                                r"rows; give n_devices = 10 or leave it out"):  # fmt: skip
            load_scenario("quickstart", order)
    # both in one scenario file
    (tmp_path / "sc.toml").write_text((Path(__file__).parents[1] / "scenarios/quickstart.toml").read_text()
                                      .replace("n_devices = 20", 'n_devices = 20\ndevices = "t.csv"'))  # fmt: skip
    with pytest.raises(ScenarioError, match=r"fleet\.n_devices=20 but the device table .* has 10 device rows"):
        load_scenario(tmp_path / "sc.toml")


# (column, value as written): each is tried as a table cell and as the scenario key of the same name, on a fleet
# whose other CPU quantity keeps eps f_max^3 small; the table must admit it exactly when the scenario does
SAME_RANGE = [
    ("f_max_ghz", "10"), ("f_max_ghz", "10.5"), ("f_max_ghz", "0.0005"), ("f_min_hz", "1e6"),
    ("energy_coeff", "5e-25"), ("energy_coeff", "2e-24"), ("energy_coeff", "1e-31"), ("energy_coeff", "1e-32"),
    ("flops_per_cycle", "2000"), ("flops_per_cycle", "2e6"), ("tx_power_dbm", "33"), ("tx_power_dbm", "33.5"),
    ("tx_power_dbm", "-50"), ("tx_power_dbm", "-60"), ("tx_power_w", "2.5"), ("tx_power_w", "1.5"),
]  # fmt: skip


@pytest.mark.parametrize(("column", "value"), SAME_RANGE)
def test_a_table_admits_a_value_exactly_when_the_scenario_key_does(tmp_path, column, value):
    """One range per quantity: the table takes the scenario field's Limit, in the column's unit (GHz, dBm)."""
    base = ["fleet.f_min_ghz=0.001", "fleet.f_max_ghz=1", "fleet.energy_coeff=1e-28", "fleet.n_devices=1",
            "method.clients_per_round=1"]  # fmt: skip
    if column.startswith("f_"):  # (energy_coeff 5e-25 at 1 GHz: 500 W, under the 1 kW ceiling)
        base[2] = "fleet.energy_coeff=1e-31"  # 1e-31 at 10 GHz: 100 W
    try:
        load_scenario("quickstart", [*base, f"fleet.{column}={value}"])
        scenario_error = None
    except ScenarioError as exc:
        scenario_error = str(exc)
    (tmp_path / "t.csv").write_text(f"{column}\n{value}\n")
    table = [*base[:3], "method.clients_per_round=1", f'fleet.devices="{tmp_path / "t.csv"}"']
    if scenario_error is None:
        sc = load_scenario("quickstart", table)
        assert sc.fleet.n_devices == 1
        return
    with pytest.raises(ScenarioError, match="line 2 .*, column " + column) as table_error:
        load_scenario("quickstart", table)
    allowed = re.search(r": outside (\S+ \S+ \S+)", scenario_error).group(1)  # e.g. [0.001, 10] GHz
    assert f"is outside the allowed range {allowed}" in str(table_error.value)


def test_a_table_row_above_the_cpu_power_ceiling_fails_like_the_scenario(tmp_path):
    """eps f_max^3 <= 1 kW holds per device: a row's eps 1e-24 at 2 GHz is 8 kW; with the row's eps and the
    scenario's f_max (1 GHz) the same eps is 1 kW, allowed."""
    (tmp_path / "t.csv").write_text("energy_coeff,f_max_ghz\n1e-26,1\n1e-24,2\n")
    with pytest.raises(ScenarioError, match=r"line 3 \(line 1 is the header\): energy_coeff 1e-24 at f_max 2 GHz is "
                                            r"a CPU power eps f_max\^3 = 8e\+03 W, above 1000 W"):  # fmt: skip
        load_scenario("quickstart", [f'fleet.devices="{tmp_path / "t.csv"}"', "method.clients_per_round=2"])
    with pytest.raises(ScenarioError, match=r"the CPU power eps f_max\^3 = 8e\+03 W exceeds 1000 W"):
        load_scenario("quickstart", ["fleet.energy_coeff=1e-24", "fleet.f_max_ghz=2"])


def test_distance_keeps_the_drawn_direction_and_sizes_set_the_partition(tmp_path):
    (tmp_path / "t.csv").write_text("distance_m,n_samples,tx_power_dbm\n100,30,\n,,20\n300,50,\n")
    sc = load_scenario("quickstart", [f'fleet.devices="{tmp_path / "t.csv"}"', "method.clients_per_round=3"])
    drawn = np.array([[3.0, 4.0], [-6.0, 8.0], [0.0, -2.0]])
    placed = placed_positions(table_of(sc.fleet), drawn)
    np.testing.assert_allclose(placed, [[60.0, 80.0], [-6.0, 8.0], [0.0, -300.0]], rtol=1e-12)
    from edgefl.run.runner import make_workload
    from edgefl.seeding import Streams

    wl = make_workload(sc, Streams(sc.seed))
    drawn_sizes = make_workload(load_scenario("quickstart", ["fleet.n_devices=3", "method.clients_per_round=3"]),
                                Streams(sc.seed)).n_samples  # fmt: skip
    assert wl.n_samples.tolist() == [30, drawn_sizes[1], 50]  # the row without a size keeps its drawn size
    assert len(set(np.concatenate(wl.partitions).tolist())) == int(wl.n_samples.sum())  # no sample twice
    (tmp_path / "big.csv").write_text("n_samples\n100000\n")
    with pytest.raises(ScenarioError, match="more than the .* training samples"):
        make_workload(load_scenario("quickstart", [f'fleet.devices="{tmp_path / "big.csv"}"', "method.clients_per_round=1"]),
                      Streams(0))  # fmt: skip


@pytest.mark.slow
def test_optimize_anycost_takes_a_device_table_and_computes_rates(tmp_path):
    """A device table with distances gives the solution of the optimizer's own CSV with rates computed by hand:
    r = B log2(1 + g P / (N0 B)), g = 10^(-(128.1 + 37.6 log10(d/km))/10), B = 1 MHz, N0 B = -114 dBm."""
    d = np.array([100.0, 300.0, 540.0])
    (tmp_path / "t.csv").write_text("distance_m,profile,n_samples\n" + "".join(
        f"{x},{p},1000\n" for x, p in zip(d, ["jetson_nano", "snapdragon_7_gen1", "helio_p23"])))  # fmt: skip
    gain = 10 ** (-(128.1 + 37.6 * np.log10(d / 1000)) / 10)
    p_tx = 10 ** ((23 - 30) / 10)
    rate = 1e6 * np.log2(1 + gain * p_tx / 10 ** ((-114 - 30) / 10))
    profs = [catalogue()[k] for k in ("jetson_nano", "snapdragon_7_gen1", "helio_p23")]
    (tmp_path / "own.csv").write_text("samples,eps,f_min_hz,f_max_hz,e_max_j,rate_bps,p_tx_w\n" + "".join(
        f"1000,{p.energy_coeff!r},{p.f_min_hz!r},{p.f_max_hz!r},3.0,{float(r)!r},{p_tx!r}\n"
        for p, r in zip(profs, rate)))  # fmt: skip
    args = ["--t-max-s", "10", "--cycles-per-sample", "3e6", "--update-bits", "53.23e6", "--json"]

    def solve(*extra):
        done = subprocess.run([sys.executable, "-m", "edgefl", "optimize", "anycost", *extra, *args],
                              capture_output=True, text=True, env=ENV)  # fmt: skip
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    table = solve("--devices", str(tmp_path / "t.csv"), "--e-max-j", "3")
    own = solve("--devices", str(tmp_path / "own.csv"))
    for a, b in zip(table, own):
        assert a["feasible"] and b["feasible"]
        for key in ("alpha", "beta", "f_hz", "t_s", "e_j"):
            assert a[key] == pytest.approx(b[key], rel=1e-9), key
        assert 0 < a["t_s"] <= 10.0 * (1 + 1e-9) and 0 < a["e_j"] <= 3.0 * (1 + 1e-9)


@pytest.mark.slow
def test_a_run_folder_holds_its_fleet_as_a_device_table(tmp_path):
    """`edgefl run` writes the devices it ran as fleet.csv: each device's own frequency range, CPU power and
    distance from the user's table, and running the scenario on that file gives the run's tables again."""
    table = _ten_devices(tmp_path / "fleet.csv")
    sets = [f'fleet.devices="{table}"', "rounds=2", "method.clients_per_round=10", 'channel.mobility="static"']
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "edgefl", "run", "quickstart", "--quiet", "--out", str(out),
                           *sum((["--set", s] for s in sets), [])], capture_output=True, text=True, env=ENV)  # fmt: skip
    assert done.returncode == 0, done.stderr
    fleet = pd.read_csv(out / "fleet.csv")
    for i in range(10):
        p = catalogue()[PROFILES[i % 2]]
        row = fleet.iloc[i]
        assert (row["f_min_hz"], row["f_max_hz"]) == (p.f_min_hz, p.f_max_hz)
        # the quickstart's realistic physics: P = P_static + eps f^3, eps the profile's dynamic part (issue #33)
        assert row["static_power_w"] == p.static_power_w
        assert row["static_power_w"] + row["energy_coeff"] * row["f_max_hz"] ** 3 == pytest.approx(p.power_w, rel=1e-9)
    np.testing.assert_allclose(np.hypot(fleet["x_m"], fleet["y_m"]), NEAR + EDGE, rtol=1e-12)
    again = run_scenario(load_scenario("quickstart", [*sets[1:], f'fleet.devices="{out / "fleet.csv"}"']))
    rounds = pd.read_csv(out / "rounds.csv").drop(columns=["wall_time_s"])
    pd.testing.assert_frame_equal(again.rounds.drop(columns=["wall_time_s"]).reset_index(drop=True), rounds,
                                  check_dtype=False)  # fmt: skip


def test_a_dataframe_table_goes_with_its_scenario_and_no_registry_keeps_it():
    """The [fleet] section holds a DataFrame's table: it travels with the scenario (a pickle, what worker processes
    get), a dump validated again in this process finds it while a scenario holds it, and once every scenario
    naming it is gone the table is freed and its name no longer resolves."""
    frame = pd.DataFrame({"distance_m": [50.0, 120.0, 300.0], "tx_power_dbm": [20.0, 23.0, 10.0]})
    base = load_scenario("quickstart", ["method.clients_per_round=2"])
    sc = with_devices(base, frame)
    name = sc.fleet.devices
    assert name.startswith("dataframe:") and sc.fleet.n_devices == 3
    assert with_devices(base, frame.copy()).fleet.devices == name  # named by its content
    assert with_devices(base, frame.assign(tx_power_dbm=[20.0, 23.0, 11.0])).fleet.devices != name
    np.testing.assert_allclose(table_of(pickle.loads(pickle.dumps(sc)).fleet).values["tx_power_w"],
                               [0.1, 10**-0.7, 0.01])  # fmt: skip
    again = scenario_from_dict(sc.model_dump(mode="json"))
    assert again.fleet.devices == name and table_of(again.fleet) is table_of(sc.fleet)
    table = weakref.ref(table_of(sc.fleet))
    del sc, again
    gc.collect()
    assert table() is None
    with pytest.raises(ScenarioError, match="a DataFrame that no scenario of this process holds"):
        load_scenario("quickstart", [f'fleet.devices="{name}"'])


@pytest.mark.slow  # starts worker processes
def test_worker_processes_get_a_dataframe_table_with_the_scenario():
    """A worker process draws its devices from the pickled scenario: the table travels in it (a name alone would
    not resolve there), and the tables equal the inline run's."""
    frame = pd.DataFrame({"distance_m": [50.0, 120.0, 300.0, 80.0], "tx_power_dbm": [20.0, 23.0, 10.0, 15.0]})
    base = ["rounds=1", "method.clients_per_round=4", 'model.name="logreg"']
    inline = run_scenario(with_devices(load_scenario("quickstart", base), frame))
    pooled = run_scenario(with_devices(load_scenario("quickstart", [*base, 'train.executor="processes"',
                                                                    "train.workers=2"]), frame))  # fmt: skip
    _tables_equal(inline, pooled)
