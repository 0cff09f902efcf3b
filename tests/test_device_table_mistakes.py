"""Device tables a new user writes wrong (issue 35): a misspelt column, positions in some rows only, a ``--set``
path read from the current folder, CSV text in a ``.parquet`` file. Each is measured as the user meets it: exit
code, the lines printed, and nothing written where the input is refused."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from edgefl.cli import app
from edgefl.errors import ScenarioError
from edgefl.run.load import load_scenario
from edgefl.scenario.device_table import device_table_from_frame, position_gaps

DISTANCES = [60.0, 120.0, "", 180.0, 90.0, 150.0]  # the third device (line 4 of the file) has no position


def _table(path, header: str, cells: list) -> str:
    rows = "".join(f"{i},{c}\n" for i, c in enumerate(cells))
    path.write_text(f"device,{header}\n{rows}")
    return str(path)


def _run(tmp_path, *args: str):
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", "quickstart", "--set", "rounds=1", *args, "--out", str(out), "--quiet"])
    return result, out


def _refused(result, out) -> str:
    """The one ``error:`` line of a refused input (exit 2, nothing written)."""
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert not out.exists()
    return lines[0]


def test_misspelt_column_gets_the_nearest_valid_one(tmp_path):
    table = _table(tmp_path / "fleet.csv", "distnce_m", [60, 120, 180, 90, 150, 70])
    line = _refused(*_run(tmp_path, "--set", f"fleet.devices='{table}'"))
    assert "unknown column(s) 'distnce_m' (did you mean 'distance_m'?); columns are " in line
    assert repr(table) in line


@pytest.mark.slow  # a whole run (one round)
def test_positions_in_some_rows_only_warn_naming_the_rows(tmp_path):
    table = _table(tmp_path / "fleet.csv", "distance_m", DISTANCES)
    result, out = _run(tmp_path, "--set", f"fleet.devices='{table}'")
    assert result.exit_code == 0, result.output
    warned = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    expected = (f"device table {table!r}: line 4 (line 1 is the header) gives no distance_m while 5 other rows "
                "do: those devices are placed at drawn positions")  # fmt: skip
    assert len(warned) == 1 and warned[0].startswith(f"warning: {expected}"), result.stderr
    assert json.loads((out / "summary.json").read_text())["warnings"][0].startswith(expected)
    d = pd.read_csv(out / "device_rounds.csv").groupby("device")["distance_m"].first()
    assert np.allclose(d.drop(2, errors="ignore"), [x for i, x in enumerate(DISTANCES) if x != "" and i in d.index])


@pytest.mark.parametrize("strict", [["--strict"], ["--set", "fleet.devices_strict=true"]], ids=["--strict", "key"])
def test_positions_in_some_rows_only_refused_when_strict(tmp_path, strict):
    table = _table(tmp_path / "fleet.csv", "distance_m", DISTANCES)
    line = _refused(*_run(tmp_path, "--set", f"fleet.devices='{table}'", *strict))
    assert line.startswith(f"error: invalid scenario: fleet.devices_strict = true: device table {table!r}: line 4 "
                           "(line 1 is the header) gives no distance_m while 5 other rows do; fill in their cells")  # fmt: skip


def test_complete_or_empty_positions_do_not_warn(tmp_path):
    for cells in ([60, 120, 180, 90, 150, 70], ["", "", "", "", "", ""]):
        table = _table(tmp_path / "fleet.csv", "distance_m", cells)
        sc = load_scenario("quickstart", [f"fleet.devices='{table}'", "fleet.devices_strict=true"])
        assert sc.fleet.n_devices == 6


def test_position_gaps_names_rows_of_a_frame_and_x_y_positions():
    frame = pd.DataFrame({"x_m": [10.0] * 3 + [np.nan] * 12, "y_m": [5.0] * 3 + [np.nan] * 12})
    frame.loc[1, "y_m"] = np.nan  # half a position is no position
    gaps = position_gaps(device_table_from_frame(frame))
    assert gaps == ("device table DataFrame: rows 2, 4, 5, 6, 7, 8, 9, 10, 11, 12 and 3 more (row 1 is the first "
                    "device) give no x_m/y_m while 2 other rows do")  # fmt: skip


def test_set_path_names_the_folder_it_is_read_from(tmp_path, monkeypatch):
    """A scenario file in one folder, ``--set fleet.devices=fleet.csv`` run from another: the table is read from
    the current folder, and a missing one is reported there (not "from the scenario file's folder")."""
    scenario_dir, here = tmp_path / "scenarios", tmp_path / "here"
    scenario_dir.mkdir()
    here.mkdir()
    _table(scenario_dir / "fleet.csv", "distance_m", [60, 120, 180, 90, 150, 70])
    (scenario_dir / "mine.toml").write_text(
        'name = "mine"\nrounds = 1\n[method]\nclients_per_round = 3\n[fleet]\ndevices = "fleet.csv"\n'
    )
    monkeypatch.chdir(here)
    out = here / "run"
    result = CliRunner().invoke(app, ["run", str(scenario_dir / "mine.toml"), "--set", "fleet.devices=fleet.csv",
                                      "--out", str(out)])  # fmt: skip
    line = _refused(result, out)
    assert line == (f"error: --set 'fleet.devices=fleet.csv': no such file in the current folder {str(here)!r} (a "
                    "path given with --set is read from the current folder; one in a scenario file from that file's "
                    "folder)")  # fmt: skip
    _table(here / "fleet.csv", "distance_m", [60, 120, 180, 90, 150, 70, 80])  # seven devices here
    sc = load_scenario(scenario_dir / "mine.toml", ["fleet.devices=fleet.csv"])
    assert sc.fleet.devices == str(here / "fleet.csv") and sc.fleet.n_devices == 7
    assert load_scenario(scenario_dir / "mine.toml").fleet.n_devices == 6  # the file's own, beside it


def test_parquet_file_holding_csv_text_says_so(tmp_path):
    table = tmp_path / "fleet.parquet"
    _table(table, "distance_m", [60, 120, 180, 90, 150, 70])
    line = _refused(*_run(tmp_path, "--set", f"fleet.devices='{table}'"))
    assert line == (f"error: invalid scenario: device table {str(table)!r}: not a Parquet file (it does not start "
                    "with PAR1): it holds CSV text; a CSV table must be named 'fleet.csv' (or write it as Parquet, "
                    "e.g. pandas' DataFrame.to_parquet)")  # fmt: skip


def test_real_parquet_file_and_binary_junk(tmp_path):
    pytest.importorskip("pyarrow")
    table = tmp_path / "fleet.parquet"
    pd.DataFrame({"distance_m": [60.0, 120.0, 180.0, 90.0, 150.0, 70.0]}).to_parquet(table)
    assert load_scenario("quickstart", [f"fleet.devices='{table}'"]).fleet.n_devices == 6
    junk = tmp_path / "junk.parquet"
    junk.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(ScenarioError, match="cannot read as Parquet") as refused:
        load_scenario("quickstart", [f"fleet.devices='{junk}'"])
    assert "CSV" not in str(refused.value)


def test_strict_with_resume_is_refused(tmp_path):
    result = CliRunner().invoke(app, ["run", "--resume", str(tmp_path), "--strict"])
    assert result.exit_code == 2 and "give no --strict" in result.stderr


def test_dataframe_with_positions_in_some_rows_only(tmp_path):
    """A DataFrame given from Python (edgefl.run.fleet_export.with_devices): the same warning naming its rows, and
    the same refusal under fleet.devices_strict."""
    from edgefl.run.fleet_export import with_devices
    from edgefl.run.runner import prepare

    frame = pd.DataFrame({"distance_m": [60.0, 120.0, np.nan, 180.0, 90.0, 150.0]})
    sc = with_devices(load_scenario("quickstart", ["rounds=1"]), frame)
    assert prepare(sc).warnings[0].startswith("device table DataFrame: row 3 (row 1 is the first device) gives no "
                                              "distance_m while 5 other rows do: those devices are placed")  # fmt: skip
    with pytest.raises(ScenarioError, match="fleet.devices_strict = true: device table DataFrame: row 3"):
        with_devices(load_scenario("quickstart", ["fleet.devices_strict=true"]), frame)
