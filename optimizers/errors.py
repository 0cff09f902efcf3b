"""Exceptions shared by the numerical solvers in :mod:`optimizers`."""

from __future__ import annotations

__all__ = ["InfeasibleError", "OptimizerInputError", "SolverError"]


class OptimizerInputError(ValueError):
    """Bad input to a solver.

    The message names the offending field, its value and the allowed range,
    for example ``"t_max_s=-1.0: must be > 0"``.
    """


class SolverError(RuntimeError):
    """A numerical solver did not reach an optimal status."""


class InfeasibleError(ValueError):
    """The instance has no feasible point (for example a device that cannot finish by the deadline).

    The message is one line and names the device by its index, e.g. ``"device 3 cannot make the deadline
    deadline_s=2.0: its computation alone takes 2.5 s"``; ``device`` holds that index (``None`` when no single
    device is to blame).
    """

    def __init__(self, message: str, device: int | None = None) -> None:
        super().__init__(message)
        self.device = device
