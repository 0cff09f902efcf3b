"""`edgefl optimize allocation` (edgefl/cli/opt_allocation.py): its JSON against the allocators called directly,
against hand computation (two equal devices split the band equally; a device placed by distance gets Yang et al.'s
path loss 128.1 + 37.6 log10(d/km)) and against an independent 1-D search; under a scenario's power parts, the
energy by hand; infeasible instances, missing columns and bad flags in one line with exit code 2."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import typer
from scipy.optimize import minimize_scalar
from typer.testing import CliRunner

from edgefl.cli.opt_allocation import register
from edgefl.errors import ScenarioError
from edgefl.run.load import load_scenario
from optimizers.alloc_min_energy import min_energy_allocation
from optimizers.alloc_min_time import min_time_allocation
from tests.cli_process import edgefl

N0 = 10 ** (-114 / 10) * 1e-3 / 1e6  # -114 dBm/MHz (the default, Yang et al.'s -174 dBm/Hz) in W/Hz
REL = 1e-9  # the allocators' bisections end at a relative bracket of 1e-12; hand values are closed forms
HEADER = "device,f_min_hz,f_max_hz,energy_coeff,tx_power_w,cycles,gain_db"
ROWS = [  # heterogeneous: compute, gain and power differ
    (0, 1e8, 2e9, 1e-28, 0.01, 4e7, -105.0),
    (1, 2e8, 1e9, 5e-28, 0.1, 1e8, -120.0),
    (2, 1e8, 3e9, 2e-28, 0.05, 2e7, -95.0),
]
KEYS = {"device", "bandwidth_hz", "tx_power_w", "cpu_hz", "t_cmp_s", "t_com_s", "e_cmp_j", "e_com_j"}


@pytest.fixture()
def app(command_app) -> typer.Typer:
    return command_app(register)


def write(path, rows=ROWS, header=HEADER):
    path.write_text(header + "\n" + "\n".join(",".join(map(str, r)) for r in rows) + "\n", encoding="utf-8")
    return str(path)


def invoke(app, *args):
    return CliRunner().invoke(app, ["optimize", "allocation", *args])


def run_json(app, *args) -> dict:
    result = invoke(app, *args, "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def flat(out: dict) -> np.ndarray:
    """Every number of a JSON answer, in a fixed order."""
    per = [d[k] for d in out["devices"] for k in sorted(KEYS)]
    return np.array([*per, out["round_time_s"], out["energy_j"]], dtype=float)


def columns(rows=ROWS) -> dict[str, np.ndarray]:
    a = np.array(rows, dtype=float)
    return {"f_min": a[:, 1], "f_max": a[:, 2], "eps": a[:, 3], "p": a[:, 4], "c": a[:, 5], "g": 10 ** (a[:, 6] / 10)}


def test_min_time_json_is_the_allocator_s_answer(tmp_path):
    """Through the real command line (python -m edgefl): the JSON's bandwidths, times and energies are
    min_time_allocation's at f_max and p_max, costed eps c f^2 and p t."""
    path = write(tmp_path / "d.csv")
    p = edgefl("optimize", "allocation", "--devices", path, "--objective", "min_time", "--bandwidth-hz", "2e6",
               "--update-bits", "1e6", "--json")  # fmt: skip
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    col = columns()
    ref = min_time_allocation(cycles=col["c"], cpu_hz=col["f_max"], update_bits=1e6, gain=col["g"], p_tx_w=col["p"],
                              n0_w_per_hz=N0, bandwidth_hz=2e6)  # fmt: skip
    assert [d["device"] for d in out["devices"]] == [0, 1, 2] and all(set(d) == KEYS for d in out["devices"])
    get = lambda key: np.array([d[key] for d in out["devices"]])  # noqa: E731
    np.testing.assert_allclose(get("bandwidth_hz"), ref.bandwidth_hz, rtol=REL)
    np.testing.assert_allclose(get("t_com_s"), ref.t_up_s, rtol=REL)
    np.testing.assert_allclose(get("t_cmp_s"), col["c"] / col["f_max"], rtol=REL)
    np.testing.assert_allclose(get("cpu_hz"), col["f_max"], rtol=0)
    np.testing.assert_allclose(get("tx_power_w"), col["p"], rtol=0)
    np.testing.assert_allclose(get("e_cmp_j"), col["eps"] * col["c"] * col["f_max"] ** 2, rtol=REL)
    np.testing.assert_allclose(get("e_com_j"), col["p"] * ref.t_up_s, rtol=REL)
    assert out["round_time_s"] == pytest.approx(ref.t_round_s, rel=REL)
    assert out["energy_j"] == pytest.approx(float(np.sum(get("e_cmp_j") + get("e_com_j"))), rel=1e-12)
    assert get("bandwidth_hz").sum() <= 2e6 * (1 + 1e-12)


def test_min_energy_json_is_the_allocator_s_answer(app, tmp_path):
    out = run_json(app, "--devices", write(tmp_path / "d.csv"), "--objective", "min_energy", "--bandwidth-hz", "2e6",
                   "--update-bits", "1e6", "--deadline-s", "1.5")  # fmt: skip
    col = columns()
    ref = min_energy_allocation(cycles=col["c"], kappa=col["eps"], f_min_hz=col["f_min"], f_max_hz=col["f_max"],
                                p_max_w=col["p"], update_bits=1e6, gain=col["g"], n0_w_per_hz=N0, bandwidth_hz=2e6,
                                deadline_s=1.5)  # fmt: skip
    get = lambda key: np.array([d[key] for d in out["devices"]])  # noqa: E731
    for key, want in (("bandwidth_hz", ref.bandwidth_hz), ("tx_power_w", ref.p_tx_w), ("cpu_hz", ref.cpu_hz),
                      ("t_cmp_s", ref.t_cmp_s), ("t_com_s", ref.t_up_s), ("e_cmp_j", ref.compute_energy_j),
                      ("e_com_j", ref.upload_energy_j)):  # fmt: skip
        np.testing.assert_allclose(get(key), want, rtol=REL, err_msg=key)
    assert out["energy_j"] == pytest.approx(ref.energy_j, rel=REL)
    assert out["round_time_s"] <= 1.5 * (1 + 1e-9)
    # the plan's own numbers obey Yang et al.'s model: energy eps c f^2 + p t, rate b log2(1 + g p / (N0 b))
    np.testing.assert_allclose(get("e_cmp_j"), col["eps"] * col["c"] * get("cpu_hz") ** 2, rtol=1e-12)
    rate = get("bandwidth_hz") * np.log2(1 + col["g"] * get("tx_power_w") / (N0 * get("bandwidth_hz")))
    np.testing.assert_allclose(get("t_com_s"), 1e6 / rate, rtol=1e-9)


def _two_equal(tmp_path, second="-100"):
    return write(tmp_path / "two.csv", [(0, 1e8, 2e9, 1e-28, 0.1, 1e9, -100), (1, 1e8, 2e9, 1e-28, 0.1, 1e9, second)])


def test_two_equal_devices_split_the_band_equally_by_hand(app, tmp_path):
    """Two identical devices (g = -100 dB, p = 0.1 W, c = 1e9 cycles at f_max = 2 GHz, eps = 1e-28) sharing
    B = 1 MHz under N0 = -114 dBm/MHz: b = 0.5 MHz each, r = b log2(1 + g p / (N0 b)), t_com = S / r,
    T = c / f_max + t_com, e = eps c f_max^2 + p t_com."""
    out = run_json(app, "--devices", _two_equal(tmp_path), "--objective", "min_time", "--bandwidth-hz", "1e6",
                   "--update-bits", "1e6")  # fmt: skip
    b = 0.5e6
    rate = b * math.log2(1 + 1e-10 * 0.1 / (N0 * b))
    t_com = 1e6 / rate
    for d in out["devices"]:
        assert d["bandwidth_hz"] == pytest.approx(b, rel=REL)
        assert d["t_com_s"] == pytest.approx(t_com, rel=REL) and d["t_cmp_s"] == pytest.approx(0.5, rel=1e-15)
        assert d["e_cmp_j"] == pytest.approx(1e-28 * 1e9 * 4e18, rel=1e-12)
        assert d["e_com_j"] == pytest.approx(0.1 * t_com, rel=REL)
    assert out["round_time_s"] == pytest.approx(0.5 + t_com, rel=REL)
    assert out["energy_j"] == pytest.approx(2 * (0.4 + 0.1 * t_com), rel=REL)


def test_two_equal_devices_least_energy_against_a_one_dimensional_search(app, tmp_path):
    """The same two devices under a 1 s deadline: by symmetry each takes half the band, and its least energy is
    the minimum over its upload time t of eps c (c / (T - t))^2 + (N0 b / g) t (2^(S / (t b)) - 1) (the power
    that meets the rate exactly; f = c / (T - t) within [f_min, f_max], p within p_max): found here by scipy's
    bounded scalar search, independent of the allocator's bandwidth-price bisection."""
    out = run_json(app, "--devices", _two_equal(tmp_path), "--objective", "min_energy", "--bandwidth-hz", "1e6",
                   "--update-bits", "1e6", "--deadline-s", "1")  # fmt: skip
    b, g, c, s, eps, deadline = 0.5e6, 1e-10, 1e9, 1e6, 1e-28, 1.0
    t_min = s / (b * math.log2(1 + g * 0.1 / (N0 * b)))  # at p_max: the shortest upload on half the band

    def energy(t):
        f = min(2e9, max(1e8, c / (deadline - t)))
        return eps * c * f * f + (N0 * b / g) * t * (2 ** (s / (t * b)) - 1)

    best = minimize_scalar(energy, bounds=(t_min, deadline - c / 2e9), method="bounded",
                           options={"xatol": 1e-12})  # fmt: skip
    for d in out["devices"]:
        assert d["bandwidth_hz"] == pytest.approx(b, rel=1e-6)
    assert out["energy_j"] == pytest.approx(2 * best.fun, rel=1e-6)
    assert out["energy_j"] <= 2 * best.fun * (1 + 1e-9)  # never above the reference (it is the optimum)


def test_a_position_gets_yang_s_path_loss(app, tmp_path):
    """A device at 500 m has the gain of 128.1 + 37.6 log10(0.5) = 116.78 dB of path loss: the same plan as the
    table giving that gain_db."""
    loss = 128.1 + 37.6 * math.log10(0.5)
    by_gain = write(tmp_path / "g.csv", [(0, 1e8, 2e9, 1e-28, 0.1, 1e9, -loss), (1, 1e8, 2e9, 1e-28, 0.1, 1e9, -100)])
    by_distance = write(tmp_path / "d.csv", [(0, 1e8, 2e9, 1e-28, 0.1, 1e9, "", 500.0),
                                             (1, 1e8, 2e9, 1e-28, 0.1, 1e9, -100, "")],
                        header=HEADER + ",distance_m")  # fmt: skip
    args = ["--objective", "min_time", "--bandwidth-hz", "1e6", "--update-bits", "1e6"]
    a, b = run_json(app, "--devices", by_gain, *args), run_json(app, "--devices", by_distance, *args)
    np.testing.assert_allclose(flat(a), flat(b), rtol=1e-12)
    assert a["devices"][0]["bandwidth_hz"] > a["devices"][1]["bandwidth_hz"]  # the farther device gets more band


def test_profile_fills_the_device_columns(app, tmp_path):
    """A catalogue profile gives the frequency range, eps and transmit power a row leaves out."""
    from edgefl.scenario.catalogue import catalogue

    prof = catalogue()["helio_p23"]
    path = write(tmp_path / "p.csv", [(0, "helio_p23", 1e9, -100)], header="device,profile,cycles,gain_db")
    out = run_json(app, "--devices", path, "--objective", "min_time", "--bandwidth-hz", "1e6", "--update-bits", "1e6")
    d = out["devices"][0]
    assert (d["cpu_hz"], d["tx_power_w"]) == (prof.f_max_hz, prof.tx_power_w)
    assert d["e_cmp_j"] == pytest.approx(prof.energy_coeff * 1e9 * prof.f_max_hz**2, rel=1e-12)


def test_infeasible_deadline_exits_2_naming_the_device(app, tmp_path):
    """Device 1 computes 1e8 cycles at 1 GHz: 0.1 s, so a 0.05 s deadline cannot be met."""
    result = invoke(app, "--devices", write(tmp_path / "d.csv"), "--objective", "min_energy", "--bandwidth-hz", "2e6",
                    "--update-bits", "1e6", "--deadline-s", "0.05")  # fmt: skip
    assert result.exit_code == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: infeasible: device 1 cannot make the deadline")
    assert "--deadline-s=0.05" in lines[0] and "line 3 of" in lines[0]


def test_infeasible_band_exits_2(app, tmp_path):
    """A 1 kHz band cannot carry 1 Mbit from all three devices by 0.2 s (min_time checks the deadline)."""
    result = invoke(app, "--devices", write(tmp_path / "d.csv"), "--objective", "min_time", "--bandwidth-hz", "1e3",
                    "--update-bits", "1e6", "--deadline-s", "0.2")  # fmt: skip
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "cannot make the deadline" in result.stderr


@pytest.mark.parametrize(
    ("header", "rows", "fragment"),
    [
        ("device,f_min_hz,f_max_hz,energy_coeff,tx_power_w,gain_db", [(0, 1e8, 2e9, 1e-28, 0.1, -100)],
         "line 2 (line 1 is the header): no cycles; give a cycles column"),
        ("device,f_min_hz,f_max_hz,energy_coeff,cycles,gain_db", [(0, 1e8, 2e9, 1e-28, 1e9, -100)],
         "no tx_power_w; give a tx_power_w column or a profile"),
        ("f_min_hz,f_max_hz,energy_coeff,tx_power_w,cycles,gain_db", [(1e8, 2e9, 1e-28, 0.1, 1e9, -100)],
         "missing column device"),
        ("device,f_min_hz,f_max_hz,energy_coeff,tx_power_w,cycles", [(0, 1e8, 2e9, 1e-28, 0.1, 1e9)],
         "no gain_db and no position"),
        ("device,f_min_hz,f_max_hz,energy_coeff,tx_power_w,cycles,gain_db", [(0, 1e8, 2e9, 1e-28, 0.1, 1e9, 3)],
         "column gain_db: '3' is outside the allowed range [-250, 0] dB"),
        ("device,f_min_hz,f_max_hz,energy_coeff,tx_power_w,cycles,gain_db", [(0, 1e8, 2e9, 1e-28, 0.1, 0, -100)],
         "column cycles: '0' is outside the allowed range (0, 1e+18] cycles"),
        (HEADER + ",static_power_w", [(0, 1e8, 2e9, 1e-28, 0.1, 1e9, -100, 1.0)],
         "static_power_w: Yang et al.'s model (the default) has no static"),
    ],
)
def test_bad_table_is_one_line(app, tmp_path, header, rows, fragment):
    result = invoke(app, "--devices", write(tmp_path / "d.csv", rows, header), "--objective", "min_time",
                    "--bandwidth-hz", "1e6", "--update-bits", "1e6")  # fmt: skip
    assert result.exit_code == 2, result.stdout
    assert len(result.stderr.strip().splitlines()) == 1 and fragment in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [
        (["--bandwidth-hz", "0"], "--bandwidth-hz=0.0: outside the allowed range [1000, 2.16e+09] Hz"),
        (["--update-bits", "-1"], "--update-bits=-1.0: outside the allowed range (0, 1e+15] bit"),
        (["--deadline-s", "0"], "--deadline-s=0.0: outside the allowed range [1e-09, 3.15576e+07] s"),
        (["--noise-dbm-per-mhz", "-200"], "--noise-dbm-per-mhz=-200.0: outside the allowed range [-124, -54] dBm/MHz"),
        (["--objective", "min_energy"], "--deadline-s: --objective min_energy needs a round deadline"),
        (["--scenario", "quickstart"], "the scenario's rounds download the model first"),
        (["--scenario", "yang_fdma", "--noise-dbm-per-mhz", "-110"], "give --scenario or --noise-dbm-per-mhz"),
    ],
)
def test_bad_flag_is_one_line(app, tmp_path, flags, fragment):
    base = {"--objective": "min_time", "--bandwidth-hz": "1e6", "--update-bits": "1e6"}
    base.update(dict(zip(flags[::2], flags[1::2])))
    args = [x for kv in base.items() for x in kv]
    result = invoke(app, "--devices", _two_equal(tmp_path), *args)
    assert result.exit_code == 2, result.stdout
    assert len(result.stderr.strip().splitlines()) == 1 and fragment in result.stderr, result.stderr


def test_noise_flag_changes_the_plan_by_hand(app, tmp_path):
    """-104 dBm/MHz is 10 dB more noise: the equal split's rate is b log2(1 + g p / (10 N0 b))."""
    out = run_json(app, "--devices", _two_equal(tmp_path), "--objective", "min_time", "--bandwidth-hz", "1e6",
                   "--update-bits", "1e6", "--noise-dbm-per-mhz", "-104")  # fmt: skip
    rate = 0.5e6 * math.log2(1 + 1e-10 * 0.1 / (10 * N0 * 0.5e6))
    assert out["devices"][0]["t_com_s"] == pytest.approx(1e6 / rate, rel=REL)


def _scenario(tmp_path, extra: str = "") -> str:
    from scenarios import preset_path

    text = preset_path("yang_fdma").read_text(encoding="utf-8").replace("[fleet]\n", "[fleet]\n" + extra)
    path = tmp_path / "sc.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_scenario_physics_paper_is_the_default_model(app, tmp_path):
    """yang_fdma's physics (Shannon, -114 dBm/MHz, no power parts) plans exactly what the default model does."""
    args = ["--devices", write(tmp_path / "d.csv"), "--objective", "min_energy", "--bandwidth-hz", "2e6",
            "--update-bits", "1e6", "--deadline-s", "1.5"]  # fmt: skip
    assert run_json(app, *args, "--scenario", "yang_fdma") == run_json(app, *args)


def test_scenario_power_parts_are_charged_by_hand(app, tmp_path):
    """Static power 0.5 W, circuit power 0.2 W and PA efficiency 0.4 in the scenario: min_time's plan (f_max,
    p_max; the split does not depend on energy) is charged e_cmp = eps c f^2 + P_s c / f and
    e_com = (P_c + p / eta) t_com; so is min_energy's plan under a 2 s deadline."""
    sc = _scenario(tmp_path, "static_power_w = 0.5\ntx_circuit_power_w = 0.2\npa_efficiency = 0.4\n")
    args = ["--devices", _two_equal(tmp_path), "--bandwidth-hz", "1e6", "--update-bits", "1e6", "--scenario", sc]
    out = run_json(app, *args, "--objective", "min_time")
    t_com = 1e6 / (0.5e6 * math.log2(1 + 1e-10 * 0.1 / (N0 * 0.5e6)))
    for d in out["devices"]:
        assert d["e_cmp_j"] == pytest.approx(0.4 + 0.5 * 0.5, rel=1e-12)
        assert d["e_com_j"] == pytest.approx((0.2 + 0.1 / 0.4) * t_com, rel=REL)
    _min_energy_is_charged_by_hand(app, args, deadline=2.0, out_time=out, static=0.5, circuit=0.2, eta=0.4)


def _min_energy_is_charged_by_hand(app, args, *, deadline, out_time, static, circuit, eta, cap=None):
    """min_energy's plan meets the deadline and the band, and is charged e_cmp = eps c f^2 + P_s c / f and
    e_com = (P_c + p / eta) t_com at its own rate (written out: Shannon's, or capped at Thr_max); the min_time
    plan is a feasible point, so min_energy spends at most its energy."""
    out = run_json(app, *args, "--objective", "min_energy", "--deadline-s", str(deadline))
    assert sum(d["bandwidth_hz"] for d in out["devices"]) <= 1e6 * (1 + 1e-9)
    for d in out["devices"]:
        b, p, f = d["bandwidth_hz"], d["tx_power_w"], d["cpu_hz"]
        eff = math.log2(1 + 1e-10 * p / (N0 * b))
        eff = eff if cap is None else min(0.4 * eff, cap)
        assert d["t_com_s"] == pytest.approx(1e6 / (b * eff), rel=REL)
        assert d["t_cmp_s"] + d["t_com_s"] <= deadline * (1 + 1e-9) and p <= 0.1 * (1 + 1e-12)
        assert d["e_cmp_j"] == pytest.approx(1e-28 * 1e9 * f**2 + static * 1e9 / f, rel=REL)
        assert d["e_com_j"] == pytest.approx((circuit + p / eta) * d["t_com_s"], rel=REL)
    assert out["energy_j"] <= out_time["energy_j"] * (1 + 1e-9)


def test_scenario_truncated_link_is_planned_by_hand(app, tmp_path):
    """yang_fdma with channel.link_model = "truncated_shannon": two equal devices at g p / (N0 b) = 1e-11 /
    (3.98e-21 * 5e5) = 37 dB, above the uplink's SINR_max (15 dB), so each gets b = 0.5 MHz at the cap
    Thr_max = 2 bit/s/Hz (3GPP TR 36.942 A.2): r = 1e6 bit/s, t_com = 1 s, T = 1e9 / 2e9 + 1 = 1.5 s;
    min_energy's plan under a 3 s deadline is charged at the truncated rate."""
    from scenarios import preset_path

    text = preset_path("yang_fdma").read_text(encoding="utf-8")
    text = text.replace("[channel]\n", '[channel]\nlink_model = "truncated_shannon"\n')
    sc = tmp_path / "trunc.toml"
    sc.write_text(text, encoding="utf-8")
    args = ["--devices", _two_equal(tmp_path), "--bandwidth-hz", "1e6", "--update-bits", "1e6", "--scenario", str(sc)]
    out = run_json(app, *args, "--objective", "min_time")
    assert out["round_time_s"] == pytest.approx(1.5, rel=REL)
    for d in out["devices"]:
        assert d["bandwidth_hz"] == pytest.approx(0.5e6, rel=REL)
        assert d["t_com_s"] == pytest.approx(1.0, rel=REL)
        assert d["e_com_j"] == pytest.approx(0.1 * 1.0, rel=REL)
    _min_energy_is_charged_by_hand(app, args, deadline=3.0, out_time=out, static=0.0, circuit=0.0, eta=1.0, cap=2.0)


def test_scenario_shadowing_needs_gain_db(app, tmp_path):
    """yang_fdma draws 8 dB shadowing each round: a position alone does not give the round's gain."""
    path = write(tmp_path / "d.csv", [(0, 1e8, 2e9, 1e-28, 0.1, 1e9, 200.0)],
                 header="device,f_min_hz,f_max_hz,energy_coeff,tx_power_w,cycles,distance_m")  # fmt: skip
    result = invoke(app, "--devices", path, "--objective", "min_time", "--bandwidth-hz", "1e6", "--update-bits", "1e6",
                    "--scenario", "yang_fdma")  # fmt: skip
    assert result.exit_code == 2 and "under channel.shadowing_db" in result.stderr and "give gain_db" in result.stderr


def test_text_table(app, tmp_path):
    result = invoke(app, "--devices", _two_equal(tmp_path), "--objective", "min_time", "--bandwidth-hz", "1e6",
                    "--update-bits", "1e6")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert "min_time" in result.stdout and "round time" in result.stdout and "500" in result.stdout  # 500 kHz each


def test_runs_refuse_the_allocation_only_columns(tmp_path):
    """gain_db and cycles are the command's: a run computes gains from positions and cycles from the model."""
    path = write(tmp_path / "d.csv")
    with pytest.raises(ScenarioError, match=r"column\(s\) gain_db, cycles are read only by `edgefl optimize alloc"):
        load_scenario("yang_fdma", [f"fleet.devices={json.dumps(path)}"])
