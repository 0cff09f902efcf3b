"""FL methods: one module each, registered by name.

A method is one class (see :class:`~edgefl.methods.base.Method`: its settings model, needs and extra
columns are class attributes) plus :func:`register_method`. Scenario validation, the runner and the CLI read
everything else from this registry, so a method defined outside edgefl (``examples/custom_method.py``) runs
like a shipped one once registered.
"""

from __future__ import annotations

from edgefl.methods.anycostfl import AnycostFL
from edgefl.methods.asynchronous import FedAsync, FedBuff
from edgefl.methods.base import (
    ClientUpdate, DenseUpdate, DeviceJob, JobTable, Method, MethodSetup, Needs, RoundContext, RoundPlan,
)  # fmt: skip
from edgefl.methods.ccfedavg import CCFedAvg
from edgefl.methods.fedavg import FedAvg
from edgefl.methods.fedavg_dropout import FedAvgDropout
from edgefl.methods.fedhq import FedHQ
from edgefl.methods.fednova import FedNova
from edgefl.methods.heterofl import HeteroFL
from edgefl.methods.qsgd import QSGD
from edgefl.methods.stc import STC
from edgefl.methods.uveqfed import UVeQFed

__all__ = [
    "METHODS", "register_method", "make_method", "Method", "MethodSetup", "Needs", "RoundContext", "DeviceJob",
    "JobTable", "RoundPlan", "ClientUpdate", "DenseUpdate",
]  # fmt: skip

METHODS: dict[str, type[Method]] = {}
"""The registry: method name -> class. Read it; add to it with :func:`register_method`."""

_RESERVED = ("name", "clients_per_round", "luo")  # the other keys of the [method] table


def register_method(cls: type[Method]) -> type[Method]:
    """Add ``cls`` to the registry under ``cls.name`` (usable as a class decorator); returns ``cls``.

    Registering the same class again is a no-op; another class under a taken name is a ``ValueError``.
    """
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"{cls.__name__}.name={name!r}: a method needs a name usable as a TOML key")
    if name in _RESERVED:
        raise ValueError(f"{cls.__name__}.name={name!r}: reserved key of the [method] table")
    if METHODS.get(name, cls) is not cls:
        raise ValueError(f"method name {name!r} is already registered by {METHODS[name].__qualname__}")
    METHODS[name] = cls
    return cls


for _cls in (FedAvg, AnycostFL, CCFedAvg, FedAvgDropout, FedNova, HeteroFL, STC, QSGD, FedHQ, UVeQFed, FedAsync, FedBuff):
    register_method(_cls)


def make_method(name: str, *, settings, setup: MethodSetup) -> Method:
    """Instantiate the registered method ``name`` from its settings and setup."""
    try:
        cls = METHODS[name]
    except KeyError:
        from edgefl.errors import ScenarioError

        raise ScenarioError(f"method.name={name!r}: not implemented; available: {', '.join(sorted(METHODS))}") from None
    return cls(settings=settings, setup=setup)
