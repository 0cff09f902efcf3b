"""Uplink rate over an FDMA sub-band or a TDMA slot: Shannon capacity and how the band is shared."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from channel import _checks as check

__all__ = ["ACCESS_SCHEMES", "Access", "BANDWIDTH_MODES", "BandwidthMode", "shannon_rate_bps", "fdma_bandwidth_hz",
           "upload_bandwidth_hz"]  # fmt: skip

BandwidthMode = Literal["fixed", "split"]
BANDWIDTH_MODES: tuple[str, ...] = ("fixed", "split")
Access = Literal["fdma", "tdma"]
ACCESS_SCHEMES: tuple[str, ...] = ("fdma", "tdma")
"""How devices share the uplink: ``"fdma"``, each on its own sub-band at once; ``"tdma"``, one at a time on the
whole band (Yang et al. 2021's TDMA baseline)."""


def shannon_rate_bps(
    bandwidth_hz: Any, gain_linear: Any, tx_power_w: Any, noise_psd_w_per_hz: Any
) -> np.ndarray | np.float64:
    """Achievable uplink rate, AnycostFL eq. (8): ``r = b log2(1 + g p / (N0 b))`` (the ``"shannon"`` link model).

    bandwidth_hz: sub-band b [Hz] > 0.  gain_linear: channel power gain g [linear] >= 0.
    tx_power_w: transmit power p [W] >= 0.  noise_psd_w_per_hz: noise power spectral density N0 [W/Hz] > 0.
    Arguments broadcast (scalars or arrays, e.g. shape (n_devices,)).  Returns: rate [bit/s], broadcast shape.
    """
    b_hz = check.positive(bandwidth_hz, "bandwidth_hz")
    g = check.nonnegative(gain_linear, "gain_linear")
    p_w = check.nonnegative(tx_power_w, "tx_power_w")
    n0_w_per_hz = check.positive(noise_psd_w_per_hz, "noise_psd_w_per_hz")
    snr = g * p_w / (n0_w_per_hz * b_hz)  # received power / noise power in the sub-band [linear]
    return check.out(b_hz * np.log1p(snr) / np.log(2.0))


def fdma_bandwidth_hz(mode: BandwidthMode, n_transmitting: int, band_hz: float) -> float:
    """Sub-band each transmitting device gets in one round [Hz].

    mode: ``"fixed"`` gives every device its own ``band_hz``; ``"split"`` shares a total ``band_hz`` equally
    among the ``n_transmitting`` devices, ``band_hz / n_transmitting``.
    n_transmitting: devices uploading this round, >= 1.  band_hz: [Hz] > 0.
    """
    mode = check.choice(mode, "mode", BANDWIDTH_MODES)
    n = check.count(n_transmitting, "n_transmitting", minimum=1)
    b_hz = check.positive_scalar(band_hz, "band_hz")
    return b_hz if mode == "fixed" else b_hz / n


def upload_bandwidth_hz(access: Access, mode: BandwidthMode, n_transmitting: int, band_hz: float) -> float:
    """Band [Hz] one upload occupies: under ``"fdma"`` its sub-band (:func:`fdma_bandwidth_hz`); under ``"tdma"``
    the whole ``band_hz``, whatever ``mode`` and ``n_transmitting`` (the uploads take turns instead of sharing
    it: each is faster than on a sub-band, but waits for its turn)."""
    access = check.choice(access, "access", ACCESS_SCHEMES)
    if access == "tdma":
        return check.positive_scalar(band_hz, "band_hz")
    return fdma_bandwidth_hz(mode, n_transmitting, band_hz)
