"""Exceptions shared by the numerical solvers in :mod:`optimizers`."""

from __future__ import annotations

__all__ = ["OptimizerInputError", "SolverError"]


class OptimizerInputError(ValueError):
    """Bad input to a solver.

    The message names the offending field, its value and the allowed range,
    for example ``"t_max_s=-1.0: must be > 0"``.
    """


class SolverError(RuntimeError):
    """A numerical solver did not reach an optimal status."""
