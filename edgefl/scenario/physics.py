"""Which physics a scenario runs under: ``physics = "paper"`` (the papers' idealised model, the default) or
``"realistic"`` (what a network engineer would sign for their cell).

``"paper"`` is the model of the four papers and of their presets: the Shannon bound with no cap, no shadowing,
fading or interference unless set, thermal noise only, compute power eps f^3 alone, the radiated power as the
modem's whole draw, free downloads.

``"realistic"`` changes the defaults of the keys a scenario leaves out (a key the scenario sets always wins):

- ``channel.link_model = "truncated_shannon"`` (3GPP TR 36.942 Annex A.2, :mod:`channel.link_models`);
- ``channel.shadowing_db``: the path-loss model's own log-normal sigma, 8 dB for ``"3gpp_macro"`` (3GPP TR 36.814
  V9.0.0, Table A.2.1.1-3, macro case 1, whose path loss is the 128.1 + 37.6 log10(d/km) of ``"3gpp_macro"``);
  the other models have no sigma of their own (free space has no shadowing; a log-distance fit brings its own,
  to be set with ``channel.shadowing_db``);
- ``channel.rayleigh = true``: a Rayleigh block-fading draw per device per round;
- ``channel.interference_db = 2``: the uplink's interference margin over thermal noise in the example LTE PUSCH
  link budgets of C. Johnson, "LTE in Bullets", section 31.2.1, Table 343 (2 dB), applied to both links;
- ``channel.noise_psd_dbm_per_mhz = -111.5``: thermal noise (-114 dBm/MHz at 290 K) plus the base station's
  receiver noise figure of 2.5 dB (the same Table 343);
- ``[channel.downlink]`` present (downloads take the model's bits over the downlink rate and cost the receive
  power), unless the scenario gives ``round.downlink_s``;
- ``round.charge_idle = true``;
- each device's power parts from its catalogue profile (static power, the radio's circuit power, PA efficiency,
  receive power; the dynamic coefficient is the profile's cited power less its static part), and for a device
  without a profile :data:`REALISTIC_PROFILE`'s.
"""

from __future__ import annotations

from typing import Any, Literal

__all__ = ["PHYSICS", "Physics", "REALISTIC_PROFILE", "SHADOWING_DB", "with_physics_defaults"]

Physics = Literal["paper", "realistic"]
PHYSICS: tuple[str, ...] = ("paper", "realistic")

SHADOWING_DB = {"3gpp_macro": 8.0}
"""Each path-loss model's own log-normal shadowing sigma [dB] (TR 36.814 V9.0.0, Table A.2.1.1-3)."""

_CHANNEL = {"link_model": "truncated_shannon", "rayleigh": True, "interference_db": 2.0}
_NOISE_DBM_PER_MHZ = -114.0 + 2.5  # thermal noise at 290 K + the eNodeB noise figure ("LTE in Bullets", Table 343)

REALISTIC_PROFILE = "snapdragon_7_gen1"
"""Under the realistic physics, a device without a catalogue profile takes this profile's power parts (static
power, circuit power, PA efficiency, receive power; not its CPU): a mid-range smartphone's, whose numbers cite
their sources in the catalogue (``edgefl devices``)."""


def with_physics_defaults(data: dict[str, Any]) -> dict[str, Any]:
    """The scenario dict with the realistic physics' defaults written into the keys it leaves out (unchanged
    under ``physics = "paper"`` or when ``physics`` is not a known value: validation names that one)."""
    if not isinstance(data, dict) or data.get("physics") != "realistic":
        return data
    channel = dict(data.get("channel") or {})
    for key, value in _CHANNEL.items():
        channel.setdefault(key, value)
    pathloss = channel.get("pathloss", "3gpp_macro")
    if "shadowing_db" not in channel and pathloss in SHADOWING_DB:
        channel["shadowing_db"] = SHADOWING_DB[pathloss]
    if "noise_psd_w_per_hz" not in channel and "noise_psd_dbm_per_mhz" not in channel:
        channel["noise_psd_dbm_per_mhz"] = _NOISE_DBM_PER_MHZ
    rnd = dict(data.get("round") or {})
    if "downlink" not in channel and not rnd.get("downlink_s"):
        channel["downlink"] = {}
    rnd.setdefault("charge_idle", True)
    return {**data, "channel": channel, "round": rnd}

