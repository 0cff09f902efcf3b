"""CLI command ``edgefl optimize anycost``: AnycostFL's per-device (alpha, beta, f) from a CSV of devices.

    edgefl optimize anycost --devices FILE.csv --t-max-s T --cycles-per-sample W --update-bits S
                            [--epochs 1] [--alpha-min 0.25] [--beta-max 0.0667] [--json]

The CSV has a header with the columns ``samples, eps, f_min_hz, f_max_hz, e_max_j, rate_bps, p_tx_w`` (any
order, extra columns ignored) and one row per device, or it is a device table in the format of ``fleet.devices``
(:mod:`edgefl.scenario.device_table`: ``n_samples``, a position, a ``profile`` or the device columns, ``e_max_j`` or
``--e-max-j``), whose uplink rates are computed with the channel model (:mod:`edgefl.fleet.anycost_input`).
``--json`` prints a JSON list with one object per device (``alpha, beta, f_hz, gain, feasible, reason, t_s,
e_j``: planned time [s] and energy [J] of the round; ``reason`` is null when feasible); otherwise a table.
Bad input prints one ``error: ...`` line on stderr and exits with code 2.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from edgefl.methods.anycostfl import AnycostFLSettings
from edgefl.cli._common import fail, option_names, read_numeric_csv, user_errors
from optimizers.anycost_model import AnycostDevices  # numpy only; the solvers load on first use

if TYPE_CHECKING:
    from optimizers.anycost import AnycostSolution

__all__ = ["register", "CSV_COLUMNS"]

#: Columns the ``--devices`` CSV must have (the required fields of :class:`optimizers.anycost.AnycostDevices`;
#: the optional ``p_static_w`` is not read yet).
CSV_COLUMNS = tuple(fld.name for fld in dataclasses.fields(AnycostDevices) if fld.default is dataclasses.MISSING)
_OPTIONS = {
    "t_max_s": "--t-max-s", "cycles_per_sample": "--cycles-per-sample", "update_bits": "--update-bits",
    "epochs": "--epochs", "alpha_min": "--alpha-min", "beta_max": "--beta-max",
}  # fmt: skip
_DEVICES_HELP = (f"CSV with columns {', '.join(CSV_COLUMNS)}; one device per row. Or a device table (the format of "
                 "fleet.devices: n_samples, distance_m or x_m/y_m, profile or the device columns; rates from the "
                 "channel model).")
_DEFAULTS = AnycostFLSettings()  # the [method.anycostfl] defaults, defined once there
_INDEXED = re.compile(r"^(\w+)\[(\d+)\]=(.*)$", re.DOTALL)


def _read_devices(path: Path, e_max_j: float | None) -> tuple[AnycostDevices, list[int]]:
    """The devices of a CSV file and the file line number of each device row (a device table, the format of
    ``fleet.devices``, is converted by :func:`edgefl.fleet.anycost_input.anycost_devices`)."""
    from optimizers.errors import OptimizerInputError

    from edgefl.fleet.anycost_input import anycost_devices, is_device_table

    where = f"--devices {str(path)!r}"
    if is_device_table(path, CSV_COLUMNS):
        return anycost_devices(path, e_max_j=e_max_j)
    columns, lines = read_numeric_csv(path, CSV_COLUMNS, "--devices", rows_are="device")
    try:
        return AnycostDevices(**columns), lines
    except OptimizerInputError as exc:
        match = _INDEXED.match(str(exc))
        if match:  # "rate_bps[2]=-1.0: ..." -> "... line 4: rate_bps=-1.0: ..."
            name, i, rest = match.groups()
            raise fail(f"{where} line {lines[int(i)]}: {name}={rest}") from None
        raise fail(f"{where}: {exc}") from None


def _records(solution: AnycostSolution) -> list[dict]:
    """One JSON-ready dict per device."""
    return [
        {
            "alpha": float(solution.alpha[i]),
            "beta": float(solution.beta[i]),
            "f_hz": float(solution.f_hz[i]),
            "gain": float(solution.gain[i]),
            "feasible": bool(solution.feasible[i]),
            "reason": str(solution.reason[i]) or None,
            "t_s": float(solution.t_cmp_s[i] + solution.t_com_s[i]),
            "e_j": float(solution.e_cmp_j[i] + solution.e_com_j[i]),
        }
        for i in range(len(solution))
    ]


def register(optimize_app: typer.Typer, estimate_app: typer.Typer) -> None:
    """Add ``optimize anycost`` to ``optimize_app`` (``estimate_app`` gets nothing from AnycostFL)."""
    del estimate_app

    @optimize_app.command("anycost")
    def optimize_anycost(
        devices: Annotated[Path, typer.Option("--devices", help=_DEVICES_HELP)],
        t_max_s: Annotated[float, typer.Option("--t-max-s", help="Round deadline T_max, in seconds.")],
        cycles_per_sample: Annotated[
            float, typer.Option("--cycles-per-sample", help="CPU cycles per sample of the full model W.")
        ],
        update_bits: Annotated[
            float, typer.Option("--update-bits", help="Size of the full (uncompressed) update S, in bits.")
        ],
        epochs: Annotated[float, typer.Option("--epochs", help="Local epochs tau.")] = 1,
        alpha_min: Annotated[
            float, typer.Option("--alpha-min", help="Smallest shrinking factor, in (0, 1].")
        ] = _DEFAULTS.alpha_min,
        beta_max: Annotated[
            float, typer.Option("--beta-max", help="Largest compression rate, in (0, 1].", show_default="1/15 = 0.0667")
        ] = _DEFAULTS.beta_max,
        as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list, one object per device.")] = False,
        e_max: Annotated[Optional[float], typer.Option("--e-max-j", help="Energy budget per device [J] for a device table without e_max_j.")] = None,
    ) -> None:
        """Per-device model shrinking alpha, compression beta and CPU frequency maximising alpha^4 beta
        under latency and energy budgets (AnycostFL eqs. 19-26, closed form)."""
        from optimizers.anycost import solve_anycost
        from optimizers.errors import OptimizerInputError

        with user_errors():
            fleet, lines = _read_devices(devices, e_max)
        try:
            solution = solve_anycost(
                fleet, t_max_s=t_max_s, cycles_per_sample=cycles_per_sample, update_bits=update_bits,
                epochs=epochs, alpha_min=alpha_min, beta_max=beta_max,
            )  # fmt: skip
        except OptimizerInputError as exc:
            raise fail(option_names(str(exc), _OPTIONS)) from None
        records = _records(solution)
        if as_json:
            typer.echo(json.dumps(records))
            return
        title = f"AnycostFL: T_max={t_max_s:g} s, W={cycles_per_sample:g}, S={update_bits:g} bits"
        _print_table(records, lines, title=title)


def _print_table(records: list[dict], lines: list[int], *, title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for column in ("line", "alpha", "beta", "f [GHz]", "gain", "t (s)", "E (J)", "feasible"):
        table.add_column(column, justify="right")
    for line, rec in zip(lines, records):
        ok = rec["feasible"]
        table.add_row(
            str(line),
            f"{rec['alpha']:.4f}" if ok else "-",
            f"{rec['beta']:.4g}" if ok else "-",
            f"{rec['f_hz'] / 1e9:.4f}" if ok else "-",
            f"{rec['gain']:.4g}" if ok else "-",
            f"{rec['t_s']:.4g}" if ok else "-",
            f"{rec['e_j']:.4g}" if ok else "-",
            "yes" if ok else f"no ({rec['reason']})",
        )
    Console(highlight=False).print(table)
