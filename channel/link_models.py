"""Link models: the achieved rate of a link [bit/s] from its bandwidth and SINR.

Two models, chosen per scenario (``channel.link_model``):

- ``"shannon"``: the Shannon bound ``B log2(1 + SINR)`` with no loss and no cap, the papers' model
  (AnycostFL eq. (8)); it is :func:`channel.rate.shannon_rate_bps`, unchanged.
- ``"truncated_shannon"``: the attenuated and truncated Shannon bound that 3GPP system studies use for link
  adaptation over a set of modulation and coding schemes (3GPP TR 36.942, Annex A.2), with the parameters of the
  link's direction from :data:`TRUNCATED_SHANNON`.

NR link adaptation from the 256QAM MCS table (TS 38.214 Table 5.1.3.1-2) is not here: it needs an SINR
threshold per MCS at a BLER target, and 3GPP does not specify those (they are receiver-implementation results);
no source we could cite gives a table of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from channel import _checks as check
from channel.rate import shannon_rate_bps

__all__ = [
    "LINK_MODELS",
    "LinkModel",
    "LINK_DIRECTIONS",
    "LinkDirection",
    "TruncatedShannon",
    "TRUNCATED_SHANNON",
    "truncated_shannon_bps_per_hz",
    "truncated_shannon_rate_bps",
    "link_rate_bps",
    "max_bps_per_hz",
]

LinkModel = Literal["shannon", "truncated_shannon"]
LINK_MODELS: tuple[str, ...] = ("shannon", "truncated_shannon")
LinkDirection = Literal["uplink", "downlink"]
LINK_DIRECTIONS: tuple[str, ...] = ("uplink", "downlink")


@dataclass(frozen=True, kw_only=True)
class TruncatedShannon:
    """Parameters of the attenuated, truncated Shannon bound (3GPP TR 36.942 Annex A.2).

    alpha: attenuation [-], the fraction of the Shannon bound the link's codes reach (implementation losses).
    snr_min_db: SINR below which the link carries nothing [dB] (the most robust code's operating point).
    max_bps_per_hz: throughput of the highest code [bit/s/Hz]: the spectral efficiency never exceeds it.
    source: where the numbers come from, and how far we could check them.
    """

    alpha: float
    snr_min_db: float
    max_bps_per_hz: float
    source: str

    @property
    def snr_max_db(self) -> float:
        """SINR at which ``alpha log2(1 + SINR)`` reaches ``max_bps_per_hz`` [dB]: ``10 log10(2^(max/alpha) - 1)``."""
        return float(10.0 * np.log10(2.0 ** (self.max_bps_per_hz / self.alpha) - 1.0))


# ---- 3GPP TR 36.942 (E-UTRA radio frequency system scenarios), Annex A.2, Table A.2.1 ---------------------------
# The table gives one column per direction.  What we could check with the search tool (stored public pages and
# code, not the TR itself):
# - downlink alpha = 0.6, SNR_min = -10 dB, Thr_max = 4.4 bit/s/Hz: quoted with exactly these numbers, as TR 36.942
#   A.2, by several independent public system-level simulators.  Verified (second-hand).
# - uplink alpha = 0.4, SNR_min = -10 dB: the same pair is the uplink link-to-system mapping of the ITU-R sharing
#   simulator SHARC (ul_attenuation_factor = 0.4, ul_sinr_min = -10 dB), which does not name TR 36.942 for it.
#   Corroborated, not verified against the TR.
# - uplink Thr_max = 2.0 bit/s/Hz: ASSUMPTION, from our recollection of Table A.2.1 (uplink column "based on
#   16QAM 3/4"; alpha log2(1 + SINR) reaches 2.0 at SINR = 15.0 dB, as the downlink's 4.4 is reached at 22 dB).
#   No stored source confirms it.  The value 4.4 bit/s/Hz is the downlink's in every source we found.
TRUNCATED_SHANNON: dict[str, TruncatedShannon] = {
    "uplink": TruncatedShannon(
        alpha=0.4, snr_min_db=-10.0, max_bps_per_hz=2.0,
        source="3GPP TR 36.942 Annex A.2 Table A.2.1, uplink; alpha and SNR_min corroborated (SHARC), "
        "Thr_max = 2.0 bit/s/Hz an unverified recollection of the table (assumption)",
    ),
    "downlink": TruncatedShannon(
        alpha=0.6, snr_min_db=-10.0, max_bps_per_hz=4.4,
        source="3GPP TR 36.942 Annex A.2 Table A.2.1, downlink; all three numbers as quoted by public simulators",
    ),
}  # fmt: skip


def truncated_shannon_bps_per_hz(snr_linear: Any, params: TruncatedShannon) -> np.ndarray | np.float64:
    """Spectral efficiency of the attenuated, truncated Shannon bound, 3GPP TR 36.942 Annex A.2 [bit/s/Hz]:

        Thr = 0                            for SINR <  SINR_min
        Thr = alpha log2(1 + SINR)         for SINR_min <= SINR, capped at Thr_max
        Thr = Thr_max                      for SINR >= SINR_max (where alpha log2(1 + SINR_max) = Thr_max)

    snr_linear: SINR [linear] >= 0, any shape.  params: alpha [-], SINR_min [dB], Thr_max [bit/s/Hz].
    Returns: spectral efficiency [bit/s/Hz], same shape, in [0, Thr_max].
    """
    snr = check.nonnegative(snr_linear, "snr_linear")
    snr_min_linear = 10.0 ** (params.snr_min_db / 10.0)  # dB -> linear power ratio
    attenuated = params.alpha * np.log1p(snr) / np.log(2.0)  # alpha log2(1 + SINR)
    capped = np.minimum(attenuated, params.max_bps_per_hz)
    return check.out(np.where(snr < snr_min_linear, 0.0, capped))


def truncated_shannon_rate_bps(
    bandwidth_hz: Any,
    gain_linear: Any,
    tx_power_w: Any,
    noise_psd_w_per_hz: Any,
    *,
    direction: LinkDirection = "uplink",
) -> np.ndarray | np.float64:
    """Achieved rate under the attenuated, truncated Shannon bound (TR 36.942 Annex A.2) [bit/s]:
    ``r = b * Thr(g p / (N0 b))`` with :func:`truncated_shannon_bps_per_hz` and the ``direction``'s parameters
    (:data:`TRUNCATED_SHANNON`), so ``r <= b * Thr_max``.

    bandwidth_hz: sub-band b [Hz] > 0.  gain_linear: channel power gain g [linear] >= 0.  tx_power_w: transmit
    power p [W] >= 0.  noise_psd_w_per_hz: noise PSD N0 [W/Hz] > 0.  direction: ``"uplink"`` or ``"downlink"``.
    Arguments broadcast.  Returns: rate [bit/s], broadcast shape.
    """
    params = TRUNCATED_SHANNON[check.choice(direction, "direction", LINK_DIRECTIONS)]
    b_hz = check.positive(bandwidth_hz, "bandwidth_hz")
    g = check.nonnegative(gain_linear, "gain_linear")
    p_w = check.nonnegative(tx_power_w, "tx_power_w")
    n0_w_per_hz = check.positive(noise_psd_w_per_hz, "noise_psd_w_per_hz")
    snr = g * p_w / (n0_w_per_hz * b_hz)  # received power / noise power in the sub-band [linear]
    return check.out(b_hz * np.asarray(truncated_shannon_bps_per_hz(snr, params)))


def link_rate_bps(
    link_model: LinkModel,
    bandwidth_hz: Any,
    gain_linear: Any,
    tx_power_w: Any,
    noise_psd_w_per_hz: Any,
    *,
    direction: LinkDirection = "uplink",
) -> np.ndarray | np.float64:
    """Rate [bit/s] of the ``link_model`` (``"shannon"``: :func:`channel.rate.shannon_rate_bps`, the same call
    with the same arguments; ``"truncated_shannon"``: :func:`truncated_shannon_rate_bps` for ``direction``).
    Arguments and units as those functions'."""
    link_model = check.choice(link_model, "link_model", LINK_MODELS)
    direction = check.choice(direction, "direction", LINK_DIRECTIONS)
    if link_model == "shannon":
        return shannon_rate_bps(bandwidth_hz, gain_linear, tx_power_w, noise_psd_w_per_hz)
    return truncated_shannon_rate_bps(bandwidth_hz, gain_linear, tx_power_w, noise_psd_w_per_hz, direction=direction)


def max_bps_per_hz(link_model: LinkModel, direction: LinkDirection = "uplink") -> float:
    """The most bit/s per Hz the ``link_model`` gives a link in ``direction``: inf for ``"shannon"`` (no cap),
    Thr_max of :data:`TRUNCATED_SHANNON` for ``"truncated_shannon"``."""
    link_model = check.choice(link_model, "link_model", LINK_MODELS)
    direction = check.choice(direction, "direction", LINK_DIRECTIONS)
    return np.inf if link_model == "shannon" else TRUNCATED_SHANNON[direction].max_bps_per_hz
