"""CLI command ``edgefl optimize allocation``: each device's uplink bandwidth, transmit power and CPU frequency
for one FDMA round, from a device table.

    edgefl optimize allocation --devices TABLE --objective min_time|min_energy --bandwidth-hz B --update-bits S
                               [--deadline-s T] [--noise-dbm-per-mhz N] [--scenario FILE] [--json]

``min_time``: the least round time, every device at f_max and p_max with the band split so that all finish
together (Shi et al.; Yang et al.'s completion-time problem at a fixed local accuracy,
:func:`optimizers.alloc_min_time.min_time_allocation`); with ``--deadline-s`` it also checks that time against
the deadline. ``min_energy``: the least energy of a round that ends by ``--deadline-s`` (Yang et al.'s (P-E) at a
fixed local accuracy, :func:`optimizers.alloc_min_energy.min_energy_allocation`). The table is the format of
``fleet.devices`` (:mod:`edgefl.fleet.allocation_input` says which columns it needs). By default the physics is
Yang et al.'s own; ``--scenario FILE`` plans with that scenario's instead (min_time also under its truncated
Shannon link and power parts, and min_energy too), or refuses in one line what the allocators cannot plan
exactly under it.

``--json`` prints ``{"devices": [{"device", "bandwidth_hz", "tx_power_w", "cpu_hz", "t_cmp_s", "t_com_s",
"e_cmp_j", "e_com_j"}], "round_time_s", "energy_j"}``; otherwise a table. Bad input, and an instance no allocation
makes feasible, print one ``error: ...`` line on stderr (naming the flag, column or device) and exit with code 2.
"""

from __future__ import annotations

import json
import math
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from edgefl.cli._common import fail, user_errors
from edgefl.scenario.limits import Limit, limits_of, user_range

__all__ = ["register", "DEFAULT_NOISE_DBM_PER_MHZ"]

DEFAULT_NOISE_DBM_PER_MHZ = -114.0
"""Yang et al.'s noise PSD, -174 dBm/Hz (notes on Yang et al., §9 [CODE]) = -114 dBm/MHz: thermal noise at 290 K."""

_UPDATE_BITS = Limit(0.0, 1e15, "bit", "more than 0, at most 1e15 bits (an update of 3e13 32-bit parameters, far "
                     "above any model)", low_open=True)  # fmt: skip


class Objective(str, Enum):
    min_time = "min_time"
    min_energy = "min_energy"


def _limits():
    from edgefl.scenario.sections import ChannelConfig, RoundConfig

    channel = limits_of(ChannelConfig)
    return {"--bandwidth-hz": ("bandwidth_hz", channel["bandwidth_hz"]),
            "--noise-dbm-per-mhz": ("noise_psd_dbm_per_mhz", channel["noise_psd_w_per_hz"]),
            "--deadline-s": ("deadline_s", limits_of(RoundConfig)["deadline_s"]),
            "--update-bits": ("update_bits", _UPDATE_BITS)}  # fmt: skip


def _check(flag: str, value: float, si: float | None = None) -> float:
    """``value`` as given (``si``: its SI value when the flag's unit is not SI), or :func:`fail` naming the flag
    and its allowed range."""
    key, limit = _limits()[flag]
    si_value = value if si is None else si
    if not limit.admits(si_value):
        raise fail(f"{flag}={value!r}: outside the allowed range {user_range(key, limit)}: {limit.ground}")
    return si_value


def _records(dev, alloc: dict) -> dict:
    """The JSON object: one record per device (device order), the round time and the total energy."""
    n = dev.gain.size
    out = [
        {
            "device": i,
            **{key: float(alloc[key][i]) for key in ("bandwidth_hz", "tx_power_w", "cpu_hz", "t_cmp_s", "t_com_s",
                                                        "e_cmp_j", "e_com_j")},
        }
        for i in range(n)
    ]  # fmt: skip
    return {
        "devices": out,
        "round_time_s": float((alloc["t_cmp_s"] + alloc["t_com_s"]).max()),
        "energy_j": float((alloc["e_cmp_j"] + alloc["e_com_j"]).sum()),
    }


def plan(dev, *, objective: str, bandwidth_hz: float, update_bits: float, deadline_s: float | None,
         n0_w_per_hz: float, link_model: str = "shannon") -> dict:  # fmt: skip
    """Per-device arrays of the allocation (``bandwidth_hz, tx_power_w, cpu_hz, t_cmp_s, t_com_s, e_cmp_j,
    e_com_j``). ``min_time`` is costed by the cost model the rounds charge (:class:`edgefl.fleet.costs.CostModel`:
    with a scenario's power parts, static and circuit power and the PA efficiency included) at the rate of
    ``link_model`` (``"truncated_shannon"``: :mod:`optimizers.alloc_min_time_truncated` plans its SINR floor and
    cap); ``min_energy`` by Yang et al.'s allocator under their model, and under a scenario's truncated link or
    power parts by :mod:`optimizers.alloc_min_energy_realistic`, costed by the cost model at its allocation."""
    import numpy as np

    from channel import TRUNCATED_SHANNON, link_rate_bps
    from edgefl.fleet.allocation import with_tx_power
    from edgefl.fleet.costs import CostModel
    from optimizers.alloc_min_energy import min_energy_allocation
    from optimizers.alloc_min_energy_realistic import min_energy_realistic_allocation
    from optimizers.alloc_min_time import min_time_allocation
    from optimizers.alloc_min_time_truncated import min_time_truncated_allocation

    fl = dev.fleet
    ids = np.arange(dev.gain.size)
    if objective == "min_time":
        common = dict(cycles=dev.cycles, cpu_hz=fl.f_max_hz, update_bits=update_bits, gain=dev.gain,
                      p_tx_w=fl.tx_power_w, n0_w_per_hz=n0_w_per_hz, bandwidth_hz=bandwidth_hz, deadline_s=deadline_s)
        if link_model == "truncated_shannon":
            up = TRUNCATED_SHANNON["uplink"]
            sol = min_time_truncated_allocation(alpha=up.alpha, snr_min=10.0 ** (up.snr_min_db / 10.0),
                                                max_bps_per_hz=up.max_bps_per_hz, **common)  # fmt: skip
        else:
            sol = min_time_allocation(**common)
        rate = sol.rate_bps if link_model == "shannon" else link_rate_bps(
            link_model, sol.bandwidth_hz, dev.gain, fl.tx_power_w, n0_w_per_hz, direction="uplink")  # fmt: skip
        costs = CostModel(fl)
        t_cmp, e_cmp = costs.compute(ids, cycles=dev.cycles, steps=1, f_hz=fl.f_max_hz)
        t_com, e_com = costs.upload(ids, bits=update_bits, rate_bps=rate)
        return {"bandwidth_hz": sol.bandwidth_hz, "tx_power_w": fl.tx_power_w, "cpu_hz": fl.f_max_hz,
                "t_cmp_s": t_cmp, "t_com_s": t_com, "e_cmp_j": e_cmp, "e_com_j": e_com}  # fmt: skip
    if link_model != "shannon" or fl.has_power_parts:
        from edgefl.fleet.allocation import _link, _power_parts

        sol = min_energy_realistic_allocation(
            cycles=dev.cycles, kappa=fl.energy_coeff, f_min_hz=fl.f_min_hz, f_max_hz=fl.f_max_hz,
            p_max_w=fl.tx_power_w, update_bits=update_bits, gain=dev.gain, n0_w_per_hz=n0_w_per_hz,
            bandwidth_hz=bandwidth_hz, deadline_s=deadline_s, **_power_parts(fl, ids), **_link(link_model),
        )  # fmt: skip
        with_p = with_tx_power(CostModel(fl), ids, sol.p_tx_w)
        rate = link_rate_bps(link_model, sol.bandwidth_hz, dev.gain, sol.p_tx_w, n0_w_per_hz, direction="uplink")
        t_cmp, e_cmp = with_p.compute(ids, cycles=dev.cycles, steps=1, f_hz=sol.cpu_hz)
        t_com, e_com = with_p.upload(ids, bits=update_bits, rate_bps=rate)
        return {"bandwidth_hz": sol.bandwidth_hz, "tx_power_w": sol.p_tx_w, "cpu_hz": sol.cpu_hz,
                "t_cmp_s": t_cmp, "t_com_s": t_com, "e_cmp_j": e_cmp, "e_com_j": e_com}  # fmt: skip
    sol = min_energy_allocation(
        cycles=dev.cycles, kappa=fl.energy_coeff, f_min_hz=fl.f_min_hz, f_max_hz=fl.f_max_hz, p_max_w=fl.tx_power_w,
        update_bits=update_bits, gain=dev.gain, n0_w_per_hz=n0_w_per_hz, bandwidth_hz=bandwidth_hz,
        deadline_s=deadline_s,
    )  # fmt: skip
    return {"bandwidth_hz": sol.bandwidth_hz, "tx_power_w": sol.p_tx_w, "cpu_hz": sol.cpu_hz,
            "t_cmp_s": sol.t_cmp_s, "t_com_s": sol.t_up_s, "e_cmp_j": sol.compute_energy_j,
            "e_com_j": sol.upload_energy_j}  # fmt: skip


_FLAGS = {"deadline_s": "--deadline-s", "bandwidth_hz": "--bandwidth-hz", "update_bits": "--update-bits"}


def _flag_names(message: str) -> str:
    """The solver's argument names in a message as the command's flags (``deadline_s=2.0`` -> ``--deadline-s=2.0``)."""
    for name, flag in _FLAGS.items():
        message = message.replace(f"{name}=", f"{flag}=")
    return message


def register(optimize_app: typer.Typer, estimate_app: typer.Typer) -> None:
    """Add ``optimize allocation`` to ``optimize_app`` (``estimate_app`` gets nothing)."""
    del estimate_app

    @optimize_app.command("allocation")
    def optimize_allocation(
        devices: Annotated[Path, typer.Option("--devices", help="Device table (the format of fleet.devices, CSV or Parquet) with columns device, f_min_hz, f_max_hz, energy_coeff, tx_power_w (the maximum), cycles (per round), and gain_db [dB] or a position (distance_m, or x_m and y_m); a profile column may fill the device's columns.")],
        objective: Annotated[Objective, typer.Option("--objective", help="min_time: least round time; min_energy: least energy by --deadline-s.")],
        bandwidth_hz: Annotated[float, typer.Option("--bandwidth-hz", help="The cell's uplink band B shared by the devices [Hz].")],
        update_bits: Annotated[float, typer.Option("--update-bits", help="Bits each device uploads S [bit].")],
        deadline_s: Annotated[Optional[float], typer.Option("--deadline-s", help="Round deadline T [s]: min_energy's constraint; min_time checks it.")] = None,
        noise: Annotated[Optional[float], typer.Option("--noise-dbm-per-mhz", help=f"Noise PSD N0 [dBm/MHz] (default {DEFAULT_NOISE_DBM_PER_MHZ:g}: Yang et al.'s -174 dBm/Hz).")] = None,
        scenario: Annotated[Optional[str], typer.Option("--scenario", help="Plan with this scenario's physics (preset name or TOML): its noise, path loss and power parts.")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print a JSON object.")] = False,
    ) -> None:  # fmt: skip
        """Each device's uplink bandwidth, transmit power and CPU frequency for one FDMA round: least time
        (Shi et al.; Yang et al.'s bisection) or least energy under a deadline (Yang et al.)."""
        from channel import dbm_per_mhz_to_w_per_hz
        from edgefl.fleet.allocation_input import allocation_devices, scenario_physics, yang_physics
        from optimizers.errors import InfeasibleError, OptimizerInputError

        band = _check("--bandwidth-hz", bandwidth_hz)
        bits = _check("--update-bits", update_bits)
        deadline = None if deadline_s is None else _check("--deadline-s", deadline_s)
        if objective is Objective.min_energy and deadline is None:
            raise fail("--deadline-s: --objective min_energy needs a round deadline > 0 [s] (without one the least "
                       "energy is approached only as the round time grows without bound)")  # fmt: skip
        with user_errors():
            if scenario is not None:
                if noise is not None:
                    raise fail("--noise-dbm-per-mhz: the scenario sets the noise (channel.noise_psd_dbm_per_mhz and "
                               "channel.interference_db); give --scenario or --noise-dbm-per-mhz, not both")  # fmt: skip
                from edgefl.run.load import load_scenario

                physics = scenario_physics(load_scenario(scenario), repr(scenario))
            else:
                level = DEFAULT_NOISE_DBM_PER_MHZ if noise is None else noise
                physics = yang_physics(_check("--noise-dbm-per-mhz", level, float(dbm_per_mhz_to_w_per_hz(level))))
            dev = allocation_devices(str(devices), physics)
        try:
            alloc = plan(dev, objective=objective.value, bandwidth_hz=band, update_bits=bits, deadline_s=deadline,
                         n0_w_per_hz=physics.n0_w_per_hz, link_model=physics.link_model)  # fmt: skip
        except InfeasibleError as exc:
            line = "" if exc.device is None else f" (line {dev.lines[exc.device]} of {str(devices)!r})"
            raise fail(f"infeasible: {_flag_names(str(exc))}{line}") from None
        except OptimizerInputError as exc:
            raise fail(_flag_names(str(exc))) from None
        result = _records(dev, alloc)
        if as_json:
            typer.echo(json.dumps(result))
            return
        title = (f"{objective.value}: B={band / 1e6:g} MHz, S={bits:g} bits"
                 + ("" if deadline is None else f", T={deadline:g} s") + f"; {physics.where}")  # fmt: skip
        _print_table(result, dev.lines, title=title)


def _print_table(result: dict, lines: list[int], *, title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, caption=f"times t in s, energies E in J; round time {result['round_time_s']:.6g} s, "
                                       f"energy {result['energy_j']:.6g} J")  # fmt: skip
    for column in ("device", "line", "b kHz", "p dBm", "f GHz", "t_cmp", "t_com", "E_cmp", "E_com"):
        table.add_column(column, justify="right")
    for line, rec in zip(lines, result["devices"]):
        table.add_row(
            str(rec["device"]), str(line), f"{rec['bandwidth_hz'] / 1e3:.4g}",
            f"{10 * math.log10(rec['tx_power_w'] * 1e3):.2f}", f"{rec['cpu_hz'] / 1e9:.4g}", f"{rec['t_cmp_s']:.4g}",
            f"{rec['t_com_s']:.4g}", f"{rec['e_cmp_j']:.4g}", f"{rec['e_com_j']:.4g}",
        )  # fmt: skip
    console = Console(highlight=False)
    if not console.is_terminal:  # a pipe or a file: wide enough for every column's numbers (rich's default is 80)
        console = Console(highlight=False, width=110)
    console.print(table)
