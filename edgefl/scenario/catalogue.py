"""The device catalogue: real devices (Jetson boards, Raspberry Pis, smartphone SoCs) read from the package's
data file ``edgefl/data/devices.toml``, where every number names its source or says why it is an assumption.

A profile gives a device's CPU frequency range [Hz], sustained FLOPs per cycle, energy coefficient
eps = P / f^3 [J/(cycle Hz^2)] (AnycostFL eq. (7), from a cited CPU power P [W] at a cited frequency f [Hz]),
uplink transmit power [W] (the maximum output power of its 3GPP UE power class) and battery capacity [Wh].

It also gives the device's power by its parts, for a realistic power model: the platform's static (idle) power
[W], the radio it reaches the cell with, the radio's circuit power while transmitting [W] and its supply-to-antenna
efficiency, so that the upload power is circuit + radiated / efficiency [W], and the radio's receive power [W].
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
    ``power_w`` [W] at ``power_at_hz`` [Hz] (the cited total power), ``energy_coeff`` [J/(cycle Hz^2)]
    (P / f^3, the papers' physics), ``tx_power_w`` [W] (its UE power class's maximum, radiated),
    ``battery_wh`` [Wh] (None: mains powered).

    Power by its parts (the realistic physics): ``static_power_w`` [W] the platform's idle draw, paid while
    computing on top of the dynamic power and while waiting in a round; ``radio`` how it reaches the cell
    ("cellular modem", "USB LTE dongle"); ``tx_circuit_power_w`` [W] the radio's power while transmitting, all
    but what its power amplifier radiates; ``pa_efficiency`` (0, 1] the supply-to-antenna efficiency of the
    radiated power; ``rx_power_w`` [W] the radio's power while receiving."""

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
    static_power_w: float
    radio: str
    tx_circuit_power_w: float
    pa_efficiency: float
    rx_power_w: float

    @property
    def tx_power_w(self) -> float:
        return 10.0 ** ((self.tx_power_dbm - 30.0) / 10.0)  # dBm -> W

    @property
    def upload_power_w(self) -> float:
        """The radio's supply power [W] while uploading at its maximum output: tx_circuit_power_w +
        tx_power_w / pa_efficiency."""
        return self.tx_circuit_power_w + self.tx_power_w / self.pa_efficiency

    @property
    def dynamic_energy_coeff(self) -> float:
        """The dynamic part of the cited total power P at f [J/(cycle Hz^2)]: (power_w - static_power_w) /
        power_at_hz^3, the eps of the realistic physics, whose static power is charged separately (the papers'
        physics keeps ``energy_coeff`` = P / f^3)."""
        return (self.power_w - self.static_power_w) / self.power_at_hz**3

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
            static_power_w=float(_value(p["static_power_w"])), radio=str(_value(p["radio"])),
            tx_circuit_power_w=float(_value(p["tx_circuit_power_w"])),
            pa_efficiency=float(_value(p["pa_efficiency"])), rx_power_w=float(_value(p["rx_power_w"])),
        )  # fmt: skip
    return out


def profile(name: str, where: str = "profile") -> Profile:
    """The catalogue profile ``name``; :class:`ScenarioError` starting with ``where`` naming the valid ones."""
    profiles = catalogue()
    if name not in profiles:
        raise ScenarioError(f"{where}={name!r}: not in the device catalogue; one of {', '.join(profiles)} "
                            "(see `edgefl devices`)")  # fmt: skip
    return profiles[name]
