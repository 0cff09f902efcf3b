"""CLI commands for Luo et al.'s (K, E) design and CC-FedAvg's training probabilities.

- ``edgefl optimize ke``: K*, E* by Algorithm 2 and the geometric-program reference (Luo eqs. 20-22).
- ``edgefl estimate a0b0``: A0/B0 from a CSV of sampled runs (Luo eqs. 23-25).
- ``edgefl optimize ccfedavg``: p_i = (1/2)^floor(beta i / N), i = 0..N-1 (CC-FedAvg Sec. VI-A).

Bad input prints one ``error: ...`` line on stderr and exits with code 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from edgefl.cli._common import fail, option_names, read_numeric_csv

if TYPE_CHECKING:
    import numpy as np

__all__ = ["register"]

_CSV_COLUMNS = ("K", "E", "R_a", "R_b")
_KE_OPTIONS = {
    "n": "--n", "t_p_s": "--tp-s", "t_m_s": "--tm-s", "e_p_j": "--ep-j", "e_m_j": "--em-j",
    "a0_over_b0": "--a0-over-b0", "gamma": "--gamma",
}  # fmt: skip
_CCFEDAVG_OPTIONS = {"n": "--n", "beta": "--levels"}


def _read_samples(path: Path) -> tuple[np.ndarray, ...]:
    """Columns K, E, R_a, R_b of a CSV file (header required, names case-insensitive) as float arrays."""
    import numpy as np

    columns, _ = read_numeric_csv(path, _CSV_COLUMNS, "--samples")
    return tuple(np.asarray(columns[name]) for name in _CSV_COLUMNS)


def _optimize_ke(
    n: Annotated[int, typer.Option("--n", help="Number of devices N.")],
    tp_s: Annotated[float, typer.Option("--tp-s", help="Average time of one local iteration t_p [s].")],
    tm_s: Annotated[float, typer.Option("--tm-s", help="Average communication time per round t_m [s].")],
    ep_j: Annotated[float, typer.Option("--ep-j", help="Average energy of one local iteration e_p [J].")],
    em_j: Annotated[float, typer.Option("--em-j", help="Average communication energy per round e_m [J].")],
    a0_over_b0: Annotated[float, typer.Option("--a0-over-b0", help="A0/B0 of bound (15) (see `estimate a0b0`).")],
    gamma: Annotated[float, typer.Option("--gamma", help="Weight of energy against time, in [0, 1].")],
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON object.")] = False,
) -> None:
    """Clients per round K and local iterations E minimising P3 (Luo et al., Algorithm 2 and a GP check)."""
    from optimizers.cost_effective import LuoCostParams, solve_acs, solve_gp
    from optimizers.errors import OptimizerInputError, SolverError

    try:
        params = LuoCostParams(
            n=n, t_p_s=tp_s, t_m_s=tm_s, e_p_j=ep_j, e_m_j=em_j, gamma=gamma, a0_over_b0=a0_over_b0
        )
        acs = solve_acs(params)
        gp = solve_gp(params)
    except OptimizerInputError as exc:
        raise fail(option_names(str(exc), _KE_OPTIONS)) from None
    except SolverError as exc:
        raise fail(str(exc), code=1) from None
    result = {
        "K": acs.k,
        "E": acs.e,
        "K_cont": acs.k_cont,
        "E_cont": acs.e_cont,
        "objective": acs.objective,
        "K_gp": gp.k,
        "E_gp": gp.e,
        "objective_gp": gp.objective,
    }
    if as_json:
        typer.echo(json.dumps(result))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"Luo et al. P3: N={n}, gamma={gamma:g}, A0/B0={a0_over_b0:g}")
    for column in ("", "K", "E", "objective (x eps/B0)"):
        table.add_column(column, justify="right")
    table.add_row("Algorithm 2 (integer)", str(acs.k), str(acs.e), f"{acs.objective:.6g}")
    table.add_row("Algorithm 2 (continuous)", f"{acs.k_cont:.4f}", f"{acs.e_cont:.4f}", f"{acs.objective_cont:.6g}")
    table.add_row("geometric program", f"{gp.k:.4f}", f"{gp.e:.4f}", f"{gp.objective:.6g}")
    Console(highlight=False).print(table)


def _estimate_a0b0(
    n: Annotated[int, typer.Option("--n", help="Number of devices N.")],
    samples: Annotated[Path, typer.Option("--samples", help="CSV with columns K, E, R_a, R_b (one run per row).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON object.")] = False,
) -> None:
    """A0/B0 from sampled runs: least squares over all pairs of Luo et al. eq. (25)."""
    from optimizers.cost_effective import estimate_a0_over_b0
    from optimizers.errors import OptimizerInputError

    k, e, r_a, r_b = _read_samples(samples)
    try:
        estimate = estimate_a0_over_b0(k, e, r_a, r_b, n=n)
    except OptimizerInputError as exc:
        raise fail(f"--samples {str(samples)!r}: {exc}") from None
    if as_json:
        typer.echo(json.dumps({"a0_over_b0": estimate.a0_over_b0, "pairs": estimate.pairs}))
        return
    typer.echo(f"a0_over_b0 = {estimate.a0_over_b0:.6g}  ({estimate.pairs} pairs of {k.size} samples)")


def _optimize_ccfedavg(
    n: Annotated[int, typer.Option("--n", help="Number of clients N.")],
    levels: Annotated[int, typer.Option("--levels", help="Number of resource levels beta.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the JSON list of p_i.")] = False,
) -> None:
    """Training probabilities p_i = (1/2)^floor(beta i / N) of clients i = 0..N-1 (CC-FedAvg)."""
    import numpy as np

    from optimizers.ccfedavg import level_probabilities
    from optimizers.errors import OptimizerInputError

    try:
        p = level_probabilities(n, levels)
    except OptimizerInputError as exc:
        raise fail(option_names(str(exc), _CCFEDAVG_OPTIONS)) from None
    if as_json:
        typer.echo(json.dumps([float(x) for x in p]))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"CC-FedAvg p_i = (1/2)^floor({levels} i / {n})")
    for column in ("clients i", "count", "p_i"):
        table.add_column(column, justify="right")
    values, first, counts = np.unique(-p, return_index=True, return_counts=True)  # descending p
    for value, start, count in zip(values, first, counts):
        table.add_row(f"{start}..{start + count - 1}", str(count), f"{-value:g}")
    Console(highlight=False).print(table)


def register(optimize_app: typer.Typer, estimate_app: typer.Typer) -> None:
    """Add ``optimize ke``, ``optimize ccfedavg`` and ``estimate a0b0`` to the given Typer apps."""
    optimize_app.command("ke")(_optimize_ke)
    estimate_app.command("a0b0")(_estimate_a0b0)
    optimize_app.command("ccfedavg")(_optimize_ccfedavg)
