"""One cell's uplink radio: path loss + shadowing + fading -> channel gain, and FDMA rates under a link model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from channel import _checks as check
from channel.errors import ChannelInputError
from channel.fading import lognormal_shadowing_db, rayleigh_power_gain
from channel.link_models import LINK_DIRECTIONS, LINK_MODELS, LinkDirection, LinkModel, link_rate_bps
from channel.pathloss import pathloss_3gpp_macro_db, pathloss_free_space_db, pathloss_log_distance_db
from channel.rate import ACCESS_SCHEMES, BANDWIDTH_MODES, Access, BandwidthMode, upload_bandwidth_hz
from channel.units import dbm_per_mhz_to_w_per_hz

__all__ = ["PATHLOSS_MODELS", "PathlossModel", "RadioModel"]

PathlossModel = Literal["3gpp_macro", "log_distance", "free_space"]
PATHLOSS_MODELS: tuple[str, ...] = ("3gpp_macro", "log_distance", "free_space")

# -114 dBm/MHz is AnycostFL's noise PSD; dBm/MHz -> W/Hz happens in the converter: 10^(-114/10) mW/MHz = 3.98e-21 W/Hz
DEFAULT_NOISE_PSD_W_PER_HZ = float(dbm_per_mhz_to_w_per_hz(-114.0))


@dataclass(frozen=True, kw_only=True)
class RadioModel:
    """Uplink radio of one cell.

    pathloss: ``"3gpp_macro"`` (128.1 + 37.6 log10(d/km)), ``"log_distance"`` (uses ``exponent``,
        ``ref_distance_m``, ``ref_loss_db``) or ``"free_space"`` (uses ``carrier_hz``).
    exponent: log-distance path loss exponent [-] > 0.  ref_distance_m: [m] > 0.  ref_loss_db: [dB].
    carrier_hz: carrier frequency [Hz] > 0.
    shadowing_sigma_db: log-normal shadowing standard deviation [dB] >= 0; 0 turns shadowing off.
    rayleigh: Rayleigh block fading on/off (one draw per device per round).
    noise_psd_w_per_hz: noise power spectral density N0 [W/Hz] > 0.
    bandwidth_mode: ``"fixed"`` (every device gets ``band_hz``) or ``"split"`` (``band_hz`` shared equally
        by the devices transmitting in a round).  band_hz: [Hz] > 0.
    link_model: ``"shannon"`` (``b log2(1 + SINR)``, AnycostFL eq. (8)) or ``"truncated_shannon"`` (3GPP TR 36.942
        Annex A.2, at most Thr_max bit/s/Hz), :mod:`channel.link_models`.
    link_direction: ``"uplink"`` or ``"downlink"``: whose parameters ``"truncated_shannon"`` uses.
    access: ``"fdma"`` (each device on its sub-band, ``bandwidth_mode``) or ``"tdma"`` (one device at a time on
        the whole ``band_hz``: every rate is the whole band's at that device's SINR; who waits is the clock's).
    """

    pathloss: PathlossModel = "3gpp_macro"
    exponent: float = 3.76
    ref_distance_m: float = 1.0
    ref_loss_db: float = 30.0
    carrier_hz: float = 2.4e9
    shadowing_sigma_db: float = 0.0
    rayleigh: bool = False
    noise_psd_w_per_hz: float = DEFAULT_NOISE_PSD_W_PER_HZ
    bandwidth_mode: BandwidthMode = "fixed"
    band_hz: float = 1e6
    link_model: LinkModel = "shannon"
    link_direction: LinkDirection = "uplink"
    access: Access = "fdma"

    def __post_init__(self) -> None:
        check.choice(self.pathloss, "pathloss", PATHLOSS_MODELS)
        check.choice(self.bandwidth_mode, "bandwidth_mode", BANDWIDTH_MODES)
        check.choice(self.link_model, "link_model", LINK_MODELS)
        check.choice(self.link_direction, "link_direction", LINK_DIRECTIONS)
        check.choice(self.access, "access", ACCESS_SCHEMES)
        check.positive_scalar(self.exponent, "exponent")
        check.positive_scalar(self.ref_distance_m, "ref_distance_m")
        check.scalar(self.ref_loss_db, "ref_loss_db")
        check.positive_scalar(self.carrier_hz, "carrier_hz")
        check.nonnegative_scalar(self.shadowing_sigma_db, "shadowing_sigma_db")
        if not isinstance(self.rayleigh, (bool, np.bool_)):
            raise ChannelInputError(f"rayleigh={self.rayleigh!r}: must be True or False")
        check.positive_scalar(self.noise_psd_w_per_hz, "noise_psd_w_per_hz")
        check.positive_scalar(self.band_hz, "band_hz")

    def pathloss_db(self, distance_m: Any) -> np.ndarray:
        """Path loss of the chosen model.  distance_m: [m] > 0, shape (n,).  Returns: loss [dB], shape (n,)."""
        d_m = np.atleast_1d(check.positive(distance_m, "distance_m"))
        if d_m.ndim != 1:
            raise ChannelInputError(f"distance_m has shape {d_m.shape}: must have shape (n_devices,)")
        if self.pathloss == "3gpp_macro":
            return np.asarray(pathloss_3gpp_macro_db(d_m))
        if self.pathloss == "log_distance":
            return np.asarray(
                pathloss_log_distance_db(
                    d_m, exponent=self.exponent, ref_distance_m=self.ref_distance_m, ref_loss_db=self.ref_loss_db
                )
            )
        return np.asarray(pathloss_free_space_db(d_m, carrier_hz=self.carrier_hz))

    def gain_linear(self, distance_m: Any, rng: np.random.Generator) -> np.ndarray:
        """Channel power gain of every device for one round (block fading).

        ``g = 10^(-(PL(d) + S)/10) * |h|^2``.  Draws from ``rng`` in this order, and only when on:
        ``n`` normals for the shadowing S [dB] (if ``shadowing_sigma_db > 0``), then ``n`` exponentials for the
        Rayleigh power gain |h|^2 (if ``rayleigh``).  With both off, ``rng`` is not touched.
        distance_m: [m] > 0, shape (n,).  Returns: gain [linear], shape (n,).
        """
        rng = check.rng_of(rng)
        loss_db = self.pathloss_db(distance_m)
        n = loss_db.shape[0]
        if self.shadowing_sigma_db > 0:
            loss_db = loss_db + lognormal_shadowing_db(rng, n, self.shadowing_sigma_db)
        # dB -> linear: a loss of L dB is a power gain of 10^(-L/10)
        gain = 10.0 ** (-loss_db / 10.0)
        if self.rayleigh:
            gain = gain * rayleigh_power_gain(rng, n)
        return gain

    def upload_band_hz(self, n_transmitting: int, *, held: int = 0) -> float:
        """Band [Hz] each of ``n_transmitting`` devices (>= 1) uploads on, with ``held`` sub-bands still taken:
        :func:`channel.rate.upload_bandwidth_hz` (the whole band under ``"tdma"``)."""
        n_held = check.count(held, "held", minimum=0)
        return upload_bandwidth_hz(self.access, self.bandwidth_mode, n_transmitting + n_held, self.band_hz)

    def rates_bps(
        self, gain_linear: Any, tx_power_w: Any, transmitting_mask: Any = None, *, held: int = 0
    ) -> np.ndarray:
        """Rate of every device for one round on its FDMA sub-band (its TDMA slot's whole band), under ``link_model`` (``"shannon"``:
        AnycostFL eq. (8); ``"truncated_shannon"``: TR 36.942 Annex A.2 with ``link_direction``'s parameters).

        gain_linear: [linear] >= 0, shape (n,).  tx_power_w: [W] >= 0, a number or shape (n,).
        transmitting_mask: bool, shape (n,); ``None`` means every device transmits.  A device that does not
        transmit gets rate 0; with ``"split"`` the band is shared among the transmitting devices and ``held``
        further sub-bands (devices outside the mask still on a job they started earlier), ``band / (m + held)``.
        Returns: rate [bit/s], shape (n,).
        """
        g = np.atleast_1d(check.nonnegative(gain_linear, "gain_linear"))
        if g.ndim != 1:
            raise ChannelInputError(f"gain_linear has shape {g.shape}: must have shape (n_devices,)")
        p_w = check.nonnegative(tx_power_w, "tx_power_w")
        if p_w.shape not in ((), g.shape):
            raise ChannelInputError(f"tx_power_w has shape {p_w.shape}: must be a number or shape {g.shape}")
        p_w = np.broadcast_to(p_w, g.shape)
        mask = np.ones(g.shape, dtype=bool) if transmitting_mask is None else np.asarray(transmitting_mask)
        if mask.dtype != bool or mask.shape != g.shape:
            raise ChannelInputError(
                f"transmitting_mask has dtype {mask.dtype} and shape {mask.shape}: must be bool of shape {g.shape}"
            )
        rates_bps = np.zeros(g.shape)
        n_transmitting = int(mask.sum())
        if n_transmitting == 0:
            return rates_bps
        b_hz = self.upload_band_hz(n_transmitting, held=held)
        rates_bps[mask] = link_rate_bps(
            self.link_model, b_hz, g[mask], p_w[mask], self.noise_psd_w_per_hz, direction=self.link_direction
        )
        return rates_bps
