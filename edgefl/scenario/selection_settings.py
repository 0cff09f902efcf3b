"""``[selection]``: how the server picks the devices of a synchronous round (issue #36, point 3 and point 4).

``policy``: ``"random"`` (the default: K devices uniformly among the online, idle ones, as every release did),
``"fedcs"`` (Nishio and Yonetani, ICC 2019: of those K, the most that finish within the round's deadline with
their uploads one after another on the whole band, chosen greedily) or ``"chen"`` (Chen et al., IEEE TWC 2021: of
those K, the devices and resource blocks (RBs) that minimise the data lost to unselected devices and packet
errors, each at the largest power its energy budget allows; ``[selection.chen]`` holds the RBs). What each policy
plans with, and why, is in :mod:`edgefl.engine.selection` and docs/rounds.md ("Selection policies").
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from channel.units import dbm_to_w
from edgefl.scenario.limits import Limit, check_limits, user_range
from edgefl.scenario.section_base import Strict

__all__ = ["ChenSelectionConfig", "SelectionConfig", "SELECTION_POLICIES"]

SELECTION_POLICIES = ("random", "fedcs", "chen")

_RB_HZ = Limit(1e3, 2.16e9, "Hz", "from 1 kHz (below an NB-IoT subcarrier, 3.75 kHz) to 2.16 GHz (an IEEE 802.11ad "
               "channel); an LTE RB is 180 kHz, Chen et al.'s 1 MHz")  # fmt: skip
_INTERFERENCE_W = Limit(0.0, 1e-3, "W", "interference received on an RB from other cells: 0 (an isolated cell) to "
                        "0 dBm (1 mW), far above what a receiver tolerates (Chen et al.'s code: 1e-8 to 1.1e-7 W)")
_WATERFALL = Limit(1e-3, 1e3, "", "the waterfall threshold m of q = 1 - exp(-m (I + B N0) / (P h)): Chen et al. "
                   "quote 0.023 dB (1.0053), their code uses 1.08")
_CHEN_UNITS: dict[str, tuple[str, Any]] = {
    "rb_bandwidth_mhz": ("rb_bandwidth_hz", lambda v: v * 1e6),
}
_MAX_RBS = 275
"""Most RBs a carrier has: 275, a 5G NR carrier at its widest (3GPP TS 38.101-1 Table 5.3.2-1)."""


def _dbm_to_w(dbm: float) -> float:
    return float(dbm_to_w(dbm))  # dBm -> W


class ChenSelectionConfig(Strict):
    """``[selection.chen]``: the uplink resource blocks Chen et al.'s selection assigns (notes, Chen §9 for the
    paper's values).

    ``resource_blocks`` R (1 to 275); ``rb_bandwidth_hz`` B^U of each RB [Hz] (or ``rb_bandwidth_mhz``; Chen et
    al. 1 MHz); ``interference_w`` I_n received on each RB from other cells [W]: one number for every RB or a list
    of R numbers (or ``interference_dbm``; default 0: the cell's noise alone, ``channel.noise_psd`` with its
    ``interference_db`` rise; Chen et al.'s code adds 1e-8 to 1.1e-7 W per RB, sized for its channel h = d^-2, far
    stronger than a path-loss model's gains); ``waterfall`` m of the packet error rate (linear; default 1.08, their
    code's).
    """

    resource_blocks: int = Field(6, ge=1, le=_MAX_RBS)
    rb_bandwidth_hz: Annotated[float, Field(gt=0, allow_inf_nan=False), _RB_HZ] = 1e6
    interference_w: float | tuple[float, ...] = 0.0
    waterfall: Annotated[float, Field(gt=0, allow_inf_nan=False), _WATERFALL] = 1.08

    @model_validator(mode="before")
    @classmethod
    def _units(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(check_limits(cls, data, _CHEN_UNITS))
        if "rb_bandwidth_mhz" in data:
            if "rb_bandwidth_hz" in data:
                raise ValueError("give either rb_bandwidth_mhz or rb_bandwidth_hz, not both")
            data["rb_bandwidth_hz"] = float(data.pop("rb_bandwidth_mhz")) * 1e6
        if "interference_dbm" in data:
            if "interference_w" in data:
                raise ValueError("give either interference_dbm or interference_w, not both")
            dbm = data.pop("interference_dbm")
            _check_interference("interference_dbm", dbm, _dbm_to_w)
            as_w = [_dbm_to_w(float(v)) for v in dbm] if isinstance(dbm, list) else _dbm_to_w(float(dbm))
            data["interference_w"] = as_w
        elif "interference_w" in data:
            _check_interference("interference_w", data["interference_w"], float)
        return data

    @field_validator("interference_w")
    @classmethod
    def _finite(cls, v: float | tuple[float, ...]) -> float | tuple[float, ...]:
        _check_interference("interference_w", list(v) if isinstance(v, tuple) else v, float)
        return v

    @model_validator(mode="after")
    def _one_per_rb(self) -> ChenSelectionConfig:
        i_w = self.interference_w
        if isinstance(i_w, tuple) and len(i_w) != self.resource_blocks:
            raise ValueError(f"interference_w has {len(i_w)} values for resource_blocks={self.resource_blocks}: give "
                             "one number for every RB or one per RB")  # fmt: skip
        return self

    def interference_per_rb_w(self) -> tuple[float, ...]:
        """I_n of each RB [W], R values."""
        i_w = self.interference_w
        return tuple(i_w) if isinstance(i_w, tuple) else (float(i_w),) * self.resource_blocks


def _check_interference(key: str, value: Any, to_w: Any) -> None:
    """Each of ``value`` (a number or a list) inside :data:`_INTERFERENCE_W` once converted to W, else a
    ValueError naming the key, the first bad value and the range in the unit written."""
    values = value if isinstance(value, list) else [value]
    if not values:
        raise ValueError(f"{key}=[]: give one number for every RB or one per RB")
    for i, v in enumerate(values):
        where = f"{key}[{i}]" if isinstance(value, list) else key
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError(f"{where}={v!r}: must be a number")
        if not _INTERFERENCE_W.admits(to_w(float(v))):
            shown = user_range(key, _INTERFERENCE_W) if key.endswith("_w") else "(-inf, 0] dBm"
            raise ValueError(f"{where}={float(v):.6g}: outside {shown}: {_INTERFERENCE_W.ground}")


class SelectionConfig(Strict):
    """``[selection]``: ``policy`` (``"random"``, ``"fedcs"``, ``"chen"``) and Chen et al.'s RBs
    (``[selection.chen]``, read only under ``policy = "chen"``)."""

    policy: Literal["random", "fedcs", "chen"] = "random"
    chen: ChenSelectionConfig = ChenSelectionConfig()
