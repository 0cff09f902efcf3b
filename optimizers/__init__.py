"""The papers' solvers as plain numerical functions (numpy, scipy, cvxpy; never torch, simpy or edgefl).

- :mod:`optimizers.anycost` — AnycostFL (Li et al., INFOCOM 2023): per-device width alpha, compression beta
  and CPU frequency f in closed form (eqs. 20-26), optimal aggregation weights (eq. 13), and the per-device
  geometric program as the reference; devices with a static compute power (``p_static_w > 0``) are solved
  numerically (:mod:`optimizers.anycost_static`, re-exported as ``anycost.solve_anycost_numeric``).
- :mod:`optimizers.cost_effective` — Luo et al. (INFOCOM 2021): expected round time and energy (Lemmas 1-2),
  P3 (eq. 20), K and E by alternate convex search (Algorithm 2), its GP reference, A0/B0 estimation.
- :mod:`optimizers.ccfedavg` — CC-FedAvg (Zhang et al.): training probabilities p_i and schedules.
- :mod:`optimizers.alloc_min_time` — the FDMA bandwidth split at which every device finishes together, as early
  as possible (Shi et al., TWC 2021, sub-problem (a); Yang et al., TWC 2021, completion time).
- :mod:`optimizers.alloc_min_energy` — least energy of a round under a deadline over bandwidth, power and CPU
  frequency (Yang et al., TWC 2021, problem (P-E) at a fixed local accuracy).
- :mod:`optimizers.alloc_weighted` — least weighted round time and energy, ``w T + (1 - w) E`` (Yang et al.'s
  weighted form, arXiv v1), over the round length on top of ``alloc_min_energy``.
- :mod:`optimizers.fedcs` — FedCS's greedy client selection under a round deadline with serial uploads
  (Nishio and Yonetani, ICC 2019) and its exhaustive reference.
- :mod:`optimizers.chen_assignment` — Chen et al. (TWC 2021): packet error rate (eq. (9)), the largest power
  within the energy budget (Proposition 2) and the joint user selection / RB assignment (eqs. (23)-(24)).

Inputs and outputs are numpy arrays and small frozen dataclasses, so a notebook with a table of devices
can call them directly. Submodules load on first use (cvxpy is slow to import).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from optimizers.errors import InfeasibleError, OptimizerInputError, SolverError

if TYPE_CHECKING:
    from optimizers import (
        alloc_min_energy,
        alloc_min_time,
        alloc_weighted,
        anycost,
        ccfedavg,
        chen_assignment,
        cost_effective,
        fedcs,
    )

_MODULES = (
    "anycost", "cost_effective", "ccfedavg", "alloc_min_time", "alloc_min_energy", "alloc_weighted", "fedcs",
    "chen_assignment",
)
"""The submodules, each loaded on first use."""
__all__ = [*_MODULES, "InfeasibleError", "OptimizerInputError", "SolverError"]
_SUBMODULES = frozenset(_MODULES)


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f"optimizers.{name}")
    raise AttributeError(f"module 'optimizers' has no attribute {name!r}")
