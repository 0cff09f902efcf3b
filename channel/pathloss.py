"""Large-scale path loss models: distance [m] -> loss [dB].

All functions take distances of any shape (each > 0) and return losses of the same shape; a larger loss means a
weaker signal, so the linear channel gain is ``10^(-loss_db/10)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from channel import _checks as check

__all__ = ["pathloss_3gpp_macro_db", "pathloss_log_distance_db", "pathloss_free_space_db"]

# 3GPP TR 36.814 Annex A, macro cell at a 2 GHz carrier: PL = 128.1 + 37.6 log10(d / 1 km) [dB].
MACRO_3GPP_LOSS_AT_1_KM_DB = 128.1
MACRO_3GPP_DB_PER_DECADE = 37.6  # = 10 x the path loss exponent 3.76 (AnycostFL Sec. V-A)
M_PER_KM = 1000.0
SPEED_OF_LIGHT_M_PER_S = 299_792_458.0


def pathloss_3gpp_macro_db(distance_m: Any) -> np.ndarray | np.float64:
    """3GPP macro-cell path loss ``128.1 + 37.6 log10(d / 1 km)`` (TR 36.814; AnycostFL Sec. V-A).

    distance_m: device-to-base-station distance [m] > 0, any shape.  Returns: loss [dB], same shape.
    """
    d_m = check.positive(distance_m, "distance_m")
    return check.out(MACRO_3GPP_LOSS_AT_1_KM_DB + MACRO_3GPP_DB_PER_DECADE * np.log10(d_m / M_PER_KM))


def pathloss_log_distance_db(
    distance_m: Any, *, exponent: float, ref_distance_m: float = 1.0, ref_loss_db: float
) -> np.ndarray | np.float64:
    """Log-distance path loss ``ref_loss_db + 10 * exponent * log10(d / ref_distance_m)``.

    distance_m: [m] > 0, any shape.  exponent: path loss exponent > 0 [-].  ref_distance_m: [m] > 0.
    ref_loss_db: loss at ``ref_distance_m`` [dB].  Returns: loss [dB], same shape as ``distance_m``.
    """
    d_m = check.positive(distance_m, "distance_m")
    n = check.positive_scalar(exponent, "exponent")
    d0_m = check.positive_scalar(ref_distance_m, "ref_distance_m")
    loss0_db = check.scalar(ref_loss_db, "ref_loss_db")
    return check.out(loss0_db + 10.0 * n * np.log10(d_m / d0_m))


def pathloss_free_space_db(distance_m: Any, *, carrier_hz: float) -> np.ndarray | np.float64:
    """Free-space (Friis) path loss ``20 log10(4 pi d f / c)``.

    distance_m: [m] > 0, any shape.  carrier_hz: carrier frequency [Hz] > 0.  Returns: loss [dB], same shape.
    Valid in the far field (d much larger than the wavelength c/f); below that the formula may go negative.
    """
    d_m = check.positive(distance_m, "distance_m")
    f_hz = check.positive_scalar(carrier_hz, "carrier_hz")
    return check.out(20.0 * np.log10(4.0 * np.pi * d_m * f_hz / SPEED_OF_LIGHT_M_PER_S))
