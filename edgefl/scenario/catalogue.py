"""The device catalogue: real devices (Jetson boards, Raspberry Pis, smartphone SoCs) read from the package's
data file ``edgefl/data/devices.toml``, where every number names its source or says why it is an assumption.

A profile gives a device's CPU frequency range [Hz], sustained FLOPs per cycle, energy coefficient
eps = P / f^3 [J/(cycle Hz^2)] (AnycostFL eq. (7), from a cited CPU power P [W] at a cited frequency f [Hz]),
uplink transmit power [W] (the maximum output power of its 3GPP UE power class) and battery capacity [Wh].
"""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass
from importlib import resources
from typing import Any

from edgefl.errors import ScenarioError

__all__ = ["Profile", "catalogue", "catalogue_document", "profile"]



@dataclass(frozen=True, kw_only=True)
class Profile:
    """One catalogue device, SI units: ``f_min_hz``/``f_max_hz`` [Hz], ``flops_per_cycle`` [FLOP/cycle],
    ``power_w`` [W] at ``power_at_hz`` [Hz], ``energy_coeff`` [J/(cycle Hz^2)], ``tx_power_w`` [W] (its UE
    power class's maximum), ``battery_wh`` [Wh] (None: mains powered)."""

    key: str
    name: str
    device_class: str
    f_min_hz: float
    f_max_hz: float
    flops_per_cycle: float
    power_w: float
    power_at_hz: float
    energy_coeff: float
    ue_power_class: int
    tx_power_dbm: float
    battery_wh: float | None

    @property
    def tx_power_w(self) -> float:
        return 10.0 ** ((self.tx_power_dbm - 30.0) / 10.0)  # dBm -> W

    @property
    def max_power_w(self) -> float:
        """The CPU power [W] at ``f_max_hz`` by the cubic model, eps f_max^3."""
        return self.energy_coeff * self.f_max_hz**3


@functools.lru_cache(maxsize=1)
def catalogue_document() -> dict[str, Any]:
    """The catalogue file as parsed TOML: ``sources`` and ``profiles`` with each number's citation."""
    text = resources.files("edgefl").joinpath("data/devices.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def _value(entry: Any) -> Any:
    return entry["value"] if isinstance(entry, dict) else entry


@functools.lru_cache(maxsize=1)
def catalogue() -> dict[str, Profile]:
    """Every profile of the catalogue by its key (``jetson_nano``, ``snapdragon_8_gen2``, ...)."""
    out = {}
    for key, p in catalogue_document()["profiles"].items():
        battery = _value(p["battery_wh"])
        out[key] = Profile(
            key=key, name=p["name"], device_class=p["class"],
            f_min_hz=float(_value(p["f_min_hz"])), f_max_hz=float(_value(p["f_max_hz"])),
            flops_per_cycle=float(_value(p["flops_per_cycle"])), power_w=float(_value(p["power_w"])),
            power_at_hz=float(_value(p["power_at_hz"])), energy_coeff=float(_value(p["energy_coeff"])),
            ue_power_class=int(_value(p["ue_power_class"])), tx_power_dbm=float(_value(p["tx_power_dbm"])),
            battery_wh=None if battery == "none" else float(battery),
        )  # fmt: skip
    return out


def profile(name: str, where: str = "profile") -> Profile:
    """The catalogue profile ``name``; :class:`ScenarioError` starting with ``where`` naming the valid ones."""
    profiles = catalogue()
    if name not in profiles:
        raise ScenarioError(f"{where}={name!r}: not in the device catalogue; one of {', '.join(profiles)} "
                            "(see `edgefl devices`)")  # fmt: skip
    return profiles[name]
