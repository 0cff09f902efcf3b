"""FL methods: one module each, registered by name. Adding a method is one file plus an entry in METHODS."""

from __future__ import annotations

from edgefl.algorithms.anycostfl import AnycostFL
from edgefl.algorithms.base import ClientUpdate, DeviceJob, JobTable, Method, RoundContext, RoundPlan
from edgefl.algorithms.ccfedavg import CCFedAvg
from edgefl.algorithms.fedavg import FedAvg
from edgefl.algorithms.fedavg_dropout import FedAvgDropout
from edgefl.algorithms.fedhq import FedHQ
from edgefl.algorithms.fednova import FedNova
from edgefl.algorithms.heterofl import HeteroFL
from edgefl.algorithms.qsgd import QSGD
from edgefl.algorithms.stc import STC

__all__ = ["METHODS", "make_method", "Method", "RoundContext", "DeviceJob", "JobTable", "RoundPlan", "ClientUpdate"]

METHODS: dict[str, type[Method]] = {cls.name: cls for cls in (FedAvg, AnycostFL, CCFedAvg, FedAvgDropout, FedNova, HeteroFL, STC, QSGD, FedHQ)}


def make_method(name: str, **kwargs) -> Method:
    """Instantiate a registered method with keyword arguments (``scenario=..., workload=...``)."""
    try:
        cls = METHODS[name]
    except KeyError:
        from edgefl.errors import ScenarioError

        raise ScenarioError(f"method.name={name!r}: not implemented; available: {', '.join(sorted(METHODS))}") from None
    return cls(**kwargs)
