"""edgefl's radio, pure numpy: path loss, fading, FDMA rates under a link model (Shannon, or 3GPP's truncated
Shannon), device placement and mobility.

Imports numpy only (never edgefl, torch or simpy), so it can be used on its own from a notebook.  SI units with
the unit in every name; randomness only through an explicit ``numpy.random.Generator``.

>>> import numpy as np, channel
>>> rng = np.random.default_rng(0)
>>> d_m = channel.distances_m(channel.uniform_disk(rng, 4, radius_m=550.0, min_distance_m=10.0))
>>> radio = channel.RadioModel(shadowing_sigma_db=8.0, rayleigh=True, bandwidth_mode="split", band_hz=10e6)
>>> rates_bps = radio.rates_bps(radio.gain_linear(d_m, rng), tx_power_w=0.1)
>>> rates_bps.shape
(4,)
"""

from channel import units
from channel.errors import ChannelInputError
from channel.fading import lognormal_shadowing_db, rayleigh_power_gain
from channel.link_models import (
    LINK_DIRECTIONS,
    LINK_MODELS,
    TRUNCATED_SHANNON,
    LinkDirection,
    LinkModel,
    TruncatedShannon,
    link_rate_bps,
    max_bps_per_hz,
    truncated_shannon_bps_per_hz,
    truncated_shannon_rate_bps,
)
from channel.mobility import Mobility, RandomWalk, Redraw, Static
from channel.pathloss import pathloss_3gpp_macro_db, pathloss_free_space_db, pathloss_log_distance_db
from channel.placement import distances_m, uniform_disk
from channel.radio import PATHLOSS_MODELS, PathlossModel, RadioModel
from channel.rate import (
    ACCESS_SCHEMES,
    BANDWIDTH_MODES,
    Access,
    BandwidthMode,
    fdma_bandwidth_hz,
    shannon_rate_bps,
    upload_bandwidth_hz,
)
from channel.units import (
    db_to_linear,
    dbm_per_mhz_to_w_per_hz,
    dbm_to_w,
    ghz_to_hz,
    linear_to_db,
    mhz_to_hz,
    w_to_dbm,
)

__all__ = [
    # errors
    "ChannelInputError",
    # units (every public name of channel.units)
    *units.__all__,
    # path loss [dB]
    "pathloss_3gpp_macro_db",
    "pathloss_log_distance_db",
    "pathloss_free_space_db",
    "PATHLOSS_MODELS",
    "PathlossModel",
    # fading
    "lognormal_shadowing_db",
    "rayleigh_power_gain",
    # rate
    "shannon_rate_bps",
    "fdma_bandwidth_hz",
    "BANDWIDTH_MODES",
    "BandwidthMode",
    "upload_bandwidth_hz",
    "ACCESS_SCHEMES",
    "Access",
    # link models
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
    # placement and mobility
    "uniform_disk",
    "distances_m",
    "Mobility",
    "Static",
    "Redraw",
    "RandomWalk",
    # the combined radio
    "RadioModel",
]
