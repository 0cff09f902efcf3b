"""An asynchronous method edgefl does not ship, defined, registered and run from this one file: FedAsync with an
exponential staleness rule.

FedAsync (Xie et al., "Asynchronous Federated Optimization", 2019) mixes every arrival into the global model,
``w <- (1 - alpha_t) w + alpha_t w_i`` with ``alpha_t = alpha s(tau)``, where tau is the update's staleness in
server updates (:mod:`edgefl.methods.asynchronous` ships its constant, polynomial and hinge s, Sec. 5.2). This
file adds an exponential one, ``s(tau) = exp(-decay tau)``, by subclassing FedAsync and changing only the step:

- its settings model is the ``[method.fedasync_exp]`` table (``alpha``, ``decay`` >= 0 per server update of
  staleness, FedAvg's ``cpu_policy``), defaults here;
- :meth:`FedAsyncExp.weights` gives each update's step ``alpha exp(-decay tau)``: FedAsync's mix step uses it on
  real models, and the surrogate's asynchronous step under ``learning = "surrogate"``.

Being asynchronous is declared, not probed: ``needs`` (inherited from
:class:`~edgefl.methods.asynchronous.AsyncMethod`) says ``asynchronous=True``, so the run is played by the
asynchronous driver (dispatches on the clock, staleness, checkpoints of the jobs in flight) with nothing else
to write. With ``--decay 0`` the method is FedAsync with ``staleness = "constant"``.

It runs the ``async_digits`` preset (an MLP on digits, 40 devices going on- and offline, C = 8 jobs in flight)
with FedAsync (polynomial staleness, its default) and with the exponential rule, and prints each one's final
test accuracy and mean staleness.

    .venv/bin/python examples/custom_async_method.py [--decay 0.5] [--updates 20]
"""

from __future__ import annotations

import argparse

import numpy as np
from pydantic import Field

from edgefl.methods import register_method
from edgefl.methods.asynchronous import FedAsync
from edgefl.methods.fedavg import FedAvgSettings
from edgefl.run.runner import run_scenario
from edgefl.run.load import load_scenario


class ExpStalenessSettings(FedAvgSettings):
    """``[method.fedasync_exp]``: mixing weight ``alpha`` in (0, 1] and the staleness decay ``decay`` >= 0 [1 per
    server update]."""

    alpha: float = Field(0.6, gt=0, le=1)
    decay: float = Field(0.5, ge=0, le=100, allow_inf_nan=False)


@register_method
class FedAsyncExp(FedAsync):
    """FedAsync whose mixing weight decays exponentially with staleness: alpha_t = alpha exp(-decay tau)."""

    name = "fedasync_exp"
    Settings = ExpStalenessSettings

    def weights(self, tau: np.ndarray) -> np.ndarray:
        """Each update's step alpha exp(-decay tau), shape of ``tau``."""
        st = self.settings
        return st.alpha * np.exp(-st.decay * np.asarray(tau, dtype=float))


def main() -> None:
    ap = argparse.ArgumentParser(description="FedAsync with exponential staleness as a user-defined edgefl method")
    ap.add_argument("--decay", type=float, default=0.5)
    ap.add_argument("--updates", type=int, default=20, help="server updates per run")
    a = ap.parse_args()
    common = [f"rounds={a.updates}", "checkpoint_every=0", "train.eval_every=1"]
    for label, sets in (("fedasync", ["method.name=fedasync"]),
                        ("fedasync_exp", ["method.name=fedasync_exp", f"method.fedasync_exp.decay={a.decay}"])):  # fmt: skip
        result = run_scenario(load_scenario("async_digits", common + sets))
        acc = float(result.rounds["test_accuracy"].iloc[-1])
        staleness = float(result.rounds["staleness_mean"].mean())
        print(f"{label:12s} final test accuracy {acc:.4f} after {a.updates} updates, mean staleness {staleness:.2f}")


if __name__ == "__main__":
    main()
