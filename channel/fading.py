"""Random channel variations drawn once per device per round (block fading).

Both functions draw exactly ``n`` values from ``rng``, so a caller can rely on a fixed stream layout.
"""

from __future__ import annotations

import numpy as np

from channel import _checks as check

__all__ = ["lognormal_shadowing_db", "rayleigh_power_gain"]


def lognormal_shadowing_db(rng: np.random.Generator, n: int, sigma_db: float) -> np.ndarray:
    """Log-normal shadowing: zero-mean normal samples in dB with standard deviation ``sigma_db``.

    Add the result to a path loss [dB]. Draws ``n`` standard normals from ``rng`` (also when ``sigma_db`` is 0).
    sigma_db: [dB] >= 0.  Returns: shadowing [dB], shape (n,).
    """
    rng = check.rng_of(rng)
    n = check.count(n, "n")
    sigma = check.nonnegative_scalar(sigma_db, "sigma_db")
    return sigma * rng.standard_normal(n)


def rayleigh_power_gain(rng: np.random.Generator, n: int) -> np.ndarray:
    """Rayleigh small-scale fading power gain ``|h|^2 ~ Exp(1)`` (mean 1), one block per device.

    For ``h`` circularly-symmetric complex Gaussian with unit variance, ``|h|^2`` is exponential with mean 1;
    it is drawn directly as ``n`` standard exponentials.  Returns: gain [linear], shape (n,).
    """
    rng = check.rng_of(rng)
    n = check.count(n, "n")
    return rng.standard_exponential(n)
