"""fleet.flops_per_cycle_scale (issue #16, point 2): laptop scale that keeps the modelled scale's compute costs."""

from __future__ import annotations

import numpy as np
import pytest

from edgefl.run.runner import build_run
from edgefl.run.load import load_scenario

REL = 1e-12


def test_scaled_fleet_keeps_each_device_rounds_cycles():
    """Devices holding a quarter of the samples with FLOPs/cycle x 0.25: by hand, cycles = FLOPs / (fpc s) for
    a quarter of the FLOPs equal the unscaled cycles of the full work (same seeded draws)."""
    full = build_run(load_scenario("quickstart", ["rounds=1"]))
    small = build_run(load_scenario("quickstart", ["rounds=1", "fleet.flops_per_cycle_scale=0.25"]))
    np.testing.assert_allclose(small.fleet.flops_per_cycle, 0.25 * full.fleet.flops_per_cycle, rtol=REL)
    dev = np.arange(full.fleet.n_devices)
    work = 4e9  # FLOPs of a device-round at the modelled scale
    np.testing.assert_allclose(small.costs.cycles(dev, work / 4), full.costs.cycles(dev, work), rtol=REL)
    for name in ("f_min_hz", "f_max_hz", "energy_coeff", "tx_power_w"):  # nothing else moves
        assert np.array_equal(getattr(small.fleet, name), getattr(full.fleet, name))


@pytest.mark.slow
def test_report_states_the_scaling(tmp_path):
    from edgefl.output.results import setup_notes, write_run
    from edgefl.run.runner import resolve_info, run_scenario

    sc = load_scenario("quickstart", ["rounds=1", "fleet.flops_per_cycle_scale=0.1"])
    assert setup_notes(resolve_info(load_scenario("quickstart", ["rounds=1"]))) == []
    out = write_run(run_scenario(sc), tmp_path / "run")
    page = (out / "report.html").read_text()
    assert "FLOPs per cycle are multiplied by 0.1 (fleet.flops_per_cycle_scale)" in page


def test_scale_out_of_range_is_one_line_error():
    from edgefl.errors import EdgeflError

    with pytest.raises(EdgeflError, match="flops_per_cycle_scale"):
        load_scenario("quickstart", ["fleet.flops_per_cycle_scale=1.5"])
