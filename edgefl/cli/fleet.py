"""CLI commands ``edgefl devices`` (the device catalogue) and ``edgefl fleet`` (a scenario's fleet as a table).

    edgefl devices [--json]
    edgefl fleet SCENARIO --out fleet.csv [--set KEY=VALUE ...] [--seed N]

``devices`` prints each catalogue profile with its CPU frequency range [GHz], sustained FLOPs per cycle, CPU
power [W] at f_max (eps f_max^3), energy coefficient, UE power class and transmit power [dBm], battery [Wh],
static (idle) power [W], upload power [W] (radio circuit + radiated / PA efficiency), receive power [W] and the
radio it uses; ``--json`` prints every number with its source or assumption as written in ``edgefl/data/devices.toml``.
``fleet`` writes the fleet the scenario would draw (seed applied) as a device table (``.csv`` or ``.parquet``);
giving that file as ``fleet.devices`` reproduces the run. Bad input prints one ``error: ...`` line, exit 2.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from edgefl.cli._common import fail, user_errors

__all__ = ["register", "write_table"]


def write_table(frame, out: Path) -> None:
    """Write a device table: CSV with every float written exactly (``repr``), or Parquet."""
    from edgefl.io import atomic_write_stream, atomic_write_text

    if out.suffix.lower() in (".parquet", ".pq"):
        atomic_write_stream(out, lambda fh: frame.to_parquet(fh, engine="pyarrow", index=False))
        return
    if out.suffix.lower() != ".csv":
        raise fail(f"--out {str(out)!r}: must end in .csv or .parquet")
    import io

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(list(frame.columns))
    for row in frame.itertuples(index=False):
        writer.writerow([repr(float(v)) if isinstance(v, float) else v for v in row])
    atomic_write_text(out, buf.getvalue())


def _device_rows() -> list[dict]:
    from edgefl.scenario.catalogue import catalogue

    return [
        {
            "profile": p.key, "class": p.device_class, "f_min_ghz": p.f_min_hz / 1e9, "f_max_ghz": p.f_max_hz / 1e9,
            "flops_per_cycle": p.flops_per_cycle, "power_w_at_f_max": p.max_power_w, "energy_coeff": p.energy_coeff,
            "ue_power_class": p.ue_power_class, "tx_power_dbm": p.tx_power_dbm, "battery_wh": p.battery_wh,
            "static_power_w": p.static_power_w, "upload_power_w": p.upload_power_w, "rx_power_w": p.rx_power_w,
            "radio": p.radio, "name": p.name,
        }
        for p in catalogue().values()
    ]  # fmt: skip


def register(app: typer.Typer) -> None:
    """Add ``devices`` and ``fleet`` to ``app``."""

    @app.command("devices")
    def devices(
        as_json: Annotated[bool, typer.Option("--json", help="Every number with its source, as JSON.")] = False,
    ) -> None:
        """List the device catalogue (profiles for fleet.profiles and a device table's profile column)."""
        from edgefl.scenario.catalogue import catalogue_document

        if as_json:
            doc = catalogue_document()
            typer.echo(json.dumps({"sources": doc["sources"], "profiles": doc["profiles"]}, indent=1))
            return
        rows = _device_rows()
        header = f"{'profile':<20} {'class':<24} {'f [GHz]':>11} {'FLOP/cyc':>8} {'P@fmax [W]':>10} " \
                 f"{'eps':>9} {'UE class':>8} {'tx [dBm]':>8} {'battery [Wh]':>12} {'static [W]':>10} {'up [W]':>6} " \
                 f"{'rx [W]':>6}  radio"  # fmt: skip
        typer.echo(header)
        for r in rows:
            battery = "none" if r["battery_wh"] is None else f"{r['battery_wh']:.1f}"
            typer.echo(f"{r['profile']:<20} {r['class']:<24} {r['f_min_ghz']:>5.3g}-{r['f_max_ghz']:<5.3g} "
                       f"{r['flops_per_cycle']:>8.3g} {r['power_w_at_f_max']:>10.3g} {r['energy_coeff']:>9.3g} "
                       f"{r['ue_power_class']:>8d} {r['tx_power_dbm']:>8.3g} {battery:>12} {r['static_power_w']:>10.3g} "
                       f"{r['upload_power_w']:>6.3g} {r['rx_power_w']:>6.3g}  {r['radio']}")  # fmt: skip
        typer.echo("sources and derivations: edgefl devices --json (edgefl/data/devices.toml)")

    @app.command("fleet")
    def fleet(
        scenario: Annotated[str, typer.Argument(help="Preset name or path to a TOML file.")],
        out: Annotated[Path, typer.Option("--out", help="Device table to write (.csv or .parquet).")],
        set_: Annotated[Optional[list[str]], typer.Option("--set", help="Override KEY=VALUE, repeatable.")] = None,
        seed: Annotated[Optional[int], typer.Option("--seed", help="Scenario seed (overrides the file).")] = None,
    ) -> None:
        """Write the fleet SCENARIO would draw (seed applied) as a device table for fleet.devices."""
        from edgefl.run.fleet_export import fleet_frame
        from edgefl.run.load import load_scenario

        with user_errors():
            sc = load_scenario(scenario, list(set_ or []), seed=seed)
            frame = fleet_frame(sc)
            write_table(frame, out)
        typer.echo(f"{len(frame)} devices written to {out}")
