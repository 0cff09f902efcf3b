"""Unit conversions between the units engineers use (dB, dBm, MHz, dBm/MHz) and SI.

Every function takes a number or an array of any shape and returns the same shape (a numpy scalar for a number).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from channel import _checks as check

__all__ = [
    "db_to_linear",
    "linear_to_db",
    "dbm_to_w",
    "w_to_dbm",
    "dbm_per_mhz_to_w_per_hz",
    "mhz_to_hz",
    "ghz_to_hz",
]

HZ_PER_MHZ = 1e6
HZ_PER_GHZ = 1e9
W_PER_MW = 1e-3


def _pow10_db(x: np.ndarray, name: str) -> np.ndarray:
    """``10^(x/10)``; raise instead of returning inf when ``x`` [dB] is too large for a float."""
    with np.errstate(over="ignore"):
        result = 10.0 ** (x / 10.0)
    check.require(x, name, np.isfinite(result), "too large: 10^(x/10) overflows a float")
    return result


def db_to_linear(value_db: Any) -> np.ndarray | np.float64:
    """Power ratio from decibels: ``10^(x/10)``.

    value_db: [dB], any shape.  Returns: [linear], same shape.
    """
    x = check.to_array(value_db, "value_db")
    # dB -> linear power ratio: 10^(x/10)
    return check.out(_pow10_db(x, "value_db"))


def linear_to_db(value_linear: Any) -> np.ndarray | np.float64:
    """Decibels from a power ratio: ``10 log10(x)``.

    value_linear: [linear] > 0, any shape.  Returns: [dB], same shape.
    """
    x = check.positive(value_linear, "value_linear")
    return check.out(10.0 * np.log10(x))


def dbm_to_w(power_dbm: Any) -> np.ndarray | np.float64:
    """Power in watts from dBm: ``1e-3 * 10^(x/10)``.

    power_dbm: [dBm], any shape.  Returns: [W], same shape.
    """
    x = check.to_array(power_dbm, "power_dbm")
    # dBm -> mW: 10^(x/10) (0 dBm = 1 mW); then mW -> W: times 1e-3
    return check.out(_pow10_db(x, "power_dbm") * W_PER_MW)


def w_to_dbm(power_w: Any) -> np.ndarray | np.float64:
    """Power in dBm from watts: ``10 log10(x / 1e-3)``.

    power_w: [W] > 0, any shape.  Returns: [dBm], same shape.
    """
    x = check.positive(power_w, "power_w")
    return check.out(10.0 * np.log10(x / W_PER_MW))


def dbm_per_mhz_to_w_per_hz(psd_dbm_per_mhz: Any) -> np.ndarray | np.float64:
    """Power spectral density in W/Hz from dBm/MHz, e.g. -114 dBm/MHz -> 10^-20.4 W/Hz ~ 3.98e-21 W/Hz.

    psd_dbm_per_mhz: [dBm/MHz], any shape.  Returns: [W/Hz], same shape.
    """
    x = check.to_array(psd_dbm_per_mhz, "psd_dbm_per_mhz")
    # dBm/MHz -> mW/MHz: 10^(x/10); mW -> W: times 1e-3; per MHz -> per Hz: divide by 1e6 Hz/MHz
    return check.out(_pow10_db(x, "psd_dbm_per_mhz") * W_PER_MW / HZ_PER_MHZ)


def mhz_to_hz(value_mhz: Any) -> np.ndarray | np.float64:
    """Frequency or bandwidth in Hz from MHz.  value_mhz: [MHz], any shape.  Returns: [Hz], same shape."""
    return check.out(check.to_array(value_mhz, "value_mhz") * HZ_PER_MHZ)


def ghz_to_hz(value_ghz: Any) -> np.ndarray | np.float64:
    """Frequency in Hz from GHz.  value_ghz: [GHz], any shape.  Returns: [Hz], same shape."""
    return check.out(check.to_array(value_ghz, "value_ghz") * HZ_PER_GHZ)

