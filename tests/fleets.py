"""Fleets that tests state explicitly because their set-up needs them.

The quickstart preset draws catalogue phones, on which its 4,810-parameter MLP takes milliseconds per round, so
no device is a compute straggler and no energy budget binds. Tests whose assertions need those add
``SLOW_FLEET`` to their ``--set`` list: explicit fleet keys override the profiles' values (edgefl/fleet/build.py).
"""

from __future__ import annotations

# f_min 0.1 GHz, f_max ~ U[0.2, 1.0] GHz, eps ~ U[5e-27, 1e-26] J/(cycle Hz^2) (AnycostFL Sec. V-A), 1 FLOP/cycle
SLOW_FLEET = ["fleet.f_min_ghz=0.1", "fleet.f_max_ghz=[0.2, 1.0]", "fleet.energy_coeff=[5e-27, 1e-26]",
              "fleet.flops_per_cycle=1.0"]  # fmt: skip

# The quickstart under the papers' physics, as it ran before it moved to physics = "realistic" (issue #33): the
# Shannon rate, compute energy eps f^2 c, upload energy P_tx t at 0.1 W, free downloads. Tests whose hand-computed
# values use the papers' formulas add these to their --set list.
PAPER_QUICKSTART = ["physics=paper", "fleet.tx_power_dbm=20"]
