"""CLI command ``edgefl design ke``: choose Luo et al.'s K and E with the simulator in the loop.

    edgefl design ke SCENARIO [--rule measured|paper] [--gamma G] [--samples 10x10,20x20,...] [--seeds N]
                     [--refine N] [--exhaustive] [--tradeoff DIR] [--store DIR] [--json] [--set KEY=VALUE ...]

``--rule measured`` (default, :mod:`edgefl.design.measured`): runs the sampled designs
(``[method.luo] measured_samples``) to the target loss, fits the rounds-to-target model
ln R = a + b/E + c K^-p, and picks the (K, E) of least straggler-aware expected cost (eq. 14 with Lemma 2);
``--refine N`` also runs up to N neighbours and keeps the cheapest measured. ``--rule paper``: Luo et al.'s
Algorithm 2 as published: samples (K_i, E_i) run until F_a and F_b, A0/B0 by eqs. (23)-(25), P3 by alternate
search. Either way (K, E) is trained to the target loss and the achieved cost (eq. 8) and the overhead (cost of
the rule's sampled and confirmation runs over the chosen design's cost) are reported. ``--exhaustive`` also
runs the (K, E) grid and reports the optimality error; ``--tradeoff DIR`` writes the gamma sweep (Fig. 5e) of
both rules and the grid's optimum as tradeoff.csv and tradeoff.html; ``--store DIR`` keeps every run there so
an interrupted call resumes. Defaults come from the scenario's ``[method.luo]`` table. One progress line per
simulated run goes to stderr. Bad input prints one ``error: ...`` line on stderr and exits with code 2.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from edgefl.cli._common import fail

if TYPE_CHECKING:
    from edgefl.scenario.loading import Scenario

__all__ = ["register"]


def _pairs(text: str) -> list[tuple[int, int]]:
    """``"10x10,20x20"`` -> [(10, 10), (20, 20)]; fail() names the bad item."""
    out = []
    for item in text.split(","):
        k, sep, e = item.strip().lower().partition("x")
        try:
            pair = (int(k), int(e))
        except ValueError:
            raise fail(f"--samples {item.strip()!r}: expected KxE with integers, e.g. 10x20") from None
        if not sep or min(pair) < 1:
            raise fail(f"--samples {item.strip()!r}: expected KxE with K >= 1 and E >= 1, e.g. 10x20")
        out.append(pair)
    return out


def _ints(text: str, option: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise fail(f"{option} {text!r}: expected comma-separated integers >= 1, e.g. 1,10,100") from None
    if not values or min(values) < 1:
        raise fail(f"{option} {text!r}: expected comma-separated integers >= 1, e.g. 1,10,100")
    return values


def register(app: typer.Typer) -> None:
    """Add the ``design`` sub-app with its ``ke`` command to ``app``."""
    design_app = typer.Typer(no_args_is_help=True, help="Design loops that run the simulator (Luo et al.'s K and E).")
    app.add_typer(design_app, name="design")

    @design_app.command("ke")
    def design_ke_command(
        scenario: Annotated[str, typer.Argument(help="Preset name or TOML path (e.g. luo_setup3).")],
        rule: Annotated[str, typer.Option("--rule", help="Design rule: measured (fitted rounds, straggler-aware cost) or paper (Luo et al.'s Algorithm 2).")] = "measured",
        gamma: Annotated[Optional[float], typer.Option("--gamma", help="Weight of energy against time in [0, 1] (default: [method.luo] gamma).")] = None,
        samples: Annotated[Optional[str], typer.Option("--samples", help="Sampled designs KxE, comma-separated (default: [method.luo] measured_samples, or samples with --rule paper).")] = None,
        refine: Annotated[int, typer.Option("--refine", help="Measured rule: confirmation runs at up to N neighbours of its choice (0-4).")] = 0,
        seeds: Annotated[int, typer.Option("--seeds", help="Seeds per design, from the scenario's seed; results are seed means.")] = 1,
        f_a: Annotated[Optional[float], typer.Option("--f-a", help="Higher estimation loss F_a.")] = None,
        f_b: Annotated[Optional[float], typer.Option("--f-b", help="Lower estimation loss F_b.")] = None,
        f_target: Annotated[Optional[float], typer.Option("--f-target", help="Target loss of the design.")] = None,
        max_rounds: Annotated[Optional[int], typer.Option("--max-rounds", help="Round limit of each run (default: [method.luo] max_rounds, else the scenario's rounds).")] = None,
        exhaustive: Annotated[bool, typer.Option("--exhaustive", help="Also run the (K, E) grid and report the optimality error.")] = False,
        grid_k: Annotated[Optional[str], typer.Option("--grid-k", help="Grid of K, e.g. 1,10,100 (default: [method.luo] grid_k).")] = None,
        grid_e: Annotated[Optional[str], typer.Option("--grid-e", help="Grid of E, e.g. 5,10,20 (default: [method.luo] grid_e).")] = None,
        tradeoff: Annotated[Optional[Path], typer.Option("--tradeoff", help="Write the gamma sweep 0, 0.1, ..., 1 (Fig. 5e) to this folder.")] = None,
        jobs: Annotated[int, typer.Option("--jobs", help="Runs simulated at once (processes).")] = 1,
        store: Annotated[Optional[Path], typer.Option("--store", help="Folder that keeps every run (resumable).")] = None,
        set_: Annotated[Optional[list[str]], typer.Option("--set", help="Scenario override KEY=VALUE, repeatable.")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print a JSON object.")] = False,
    ) -> None:  # fmt: skip
        """K and E by the measured rule or Luo et al.'s Algorithm 2, with the simulator in the loop, and the cost."""
        from channel.errors import ChannelInputError
        from edgefl.errors import EdgeflError
        from edgefl.io import nan_to_none
        from optimizers.errors import OptimizerInputError, SolverError

        try:
            result = _design(
                scenario, rule=rule, refine=refine, store=store, gamma=gamma, samples=samples, seeds=seeds, f_a=f_a, f_b=f_b, f_target=f_target,
                max_rounds=max_rounds, exhaustive=exhaustive, grid_k=grid_k, grid_e=grid_e, tradeoff=tradeoff,
                jobs=jobs, overrides=list(set_ or []),
            )  # fmt: skip
        except (EdgeflError, ChannelInputError, OptimizerInputError) as exc:
            raise fail(str(exc)) from None
        except SolverError as exc:
            raise fail(str(exc), code=1) from None
        if as_json:
            typer.echo(json.dumps(nan_to_none(result, infinite=True)))  # NaN and inf (grid costs) -> null
            return
        _print_table(result)


@dataclass(frozen=True)
class _Inputs:
    """The loaded scenario and the design settings after defaults from its ``[method.luo]`` table."""

    base: Scenario
    gamma: float
    pairs: list[tuple[int, int]]  # sampled designs (K, E)
    fa: float
    fb: float
    ft: float
    limit: int  # round limit of each run
    gk: list[int]
    ge: list[int]


def _inputs(scenario: str, *, rule, refine, gamma, samples, seeds, f_a, f_b, f_target, max_rounds, grid_k, grid_e,
            jobs, overrides) -> _Inputs:  # fmt: skip
    """Loads the scenario and checks the options, filling the unset ones from ``[method.luo]``; fail() names the
    first bad one."""
    from edgefl.run.load import load_scenario

    if rule not in ("measured", "paper"):
        raise fail(f"--rule={rule!r}: must be measured or paper")
    if not 0 <= refine <= 4:
        raise fail(f"--refine={refine}: must be in [0, 4]")
    base = load_scenario(scenario, overrides)
    luo = base.method.luo
    gamma = luo.gamma if gamma is None else gamma
    if not 0.0 <= gamma <= 1.0:
        raise fail(f"--gamma={gamma!r}: must be in [0, 1]")
    if seeds < 1:
        raise fail(f"--seeds={seeds}: must be >= 1")
    if jobs < 1:
        raise fail(f"--jobs={jobs}: must be >= 1")
    default = luo.samples if rule == "paper" else luo.measured_samples
    pairs = _pairs(samples) if samples is not None else [tuple(p) for p in default]
    if len(set(pairs)) < 2:
        raise fail(f"--samples: need at least two distinct KxE designs, got {len(set(pairs))}")
    n = base.fleet.n_devices
    for k, _ in pairs:
        if k > n:
            raise fail(f"--samples: K={k} exceeds fleet.n_devices={n}")
    fa = luo.f_a if f_a is None else f_a
    fb = luo.f_b if f_b is None else f_b
    ft = luo.f_target if f_target is None else f_target
    if not fa > fb >= ft > 0:
        raise fail(f"losses F_a={fa}, F_b={fb}, F_target={ft}: need F_a > F_b >= F_target > 0")
    limit = max_rounds if max_rounds is not None else (luo.max_rounds or base.rounds)
    if limit < 1:
        raise fail(f"--max-rounds={limit}: must be >= 1")
    gk = _ints(grid_k, "--grid-k") if grid_k is not None else list(luo.grid_k)
    ge = _ints(grid_e, "--grid-e") if grid_e is not None else list(luo.grid_e)
    return _Inputs(base=base, gamma=gamma, pairs=pairs, fa=fa, fb=fb, ft=ft, limit=limit, gk=gk, ge=ge)


def _design(scenario: str, *, rule, refine, store, gamma, samples, seeds, f_a, f_b, f_target, max_rounds, exhaustive,
            grid_k, grid_e, tradeoff, jobs, overrides) -> dict:  # fmt: skip
    """Runs the sampled designs, picks (K, E) by ``rule``, trains it to the target loss and, on request, runs the
    grid and the gamma sweep; returns the JSON object that ``--json`` prints."""
    from edgefl.design import RunCache, design_ke, design_measured, estimate_ratio, fit_measured, grid_optimum
    from edgefl.design import grid_table, mean_costs, seed_costs, tradeoff_table, write_tradeoff

    inputs = _inputs(scenario, rule=rule, refine=refine, gamma=gamma, samples=samples, seeds=seeds, f_a=f_a, f_b=f_b,
                     f_target=f_target, max_rounds=max_rounds, grid_k=grid_k, grid_e=grid_e, jobs=jobs,
                     overrides=overrides)  # fmt: skip
    base, gamma, pairs, gk, ge = inputs.base, inputs.gamma, inputs.pairs, inputs.gk, inputs.ge
    fa, fb, ft = inputs.fa, inputs.fb, inputs.ft
    luo = base.method.luo
    n = base.fleet.n_devices

    seed_list = list(range(base.seed, base.seed + seeds))
    cache = RunCache(base, max_rounds=inputs.limit, progress=lambda line: print(line, file=sys.stderr, flush=True),
                     store=store)  # fmt: skip
    grid_designs = {(k, e) for k in gk if k <= n for e in ge} if exhaustive else set()
    # the paper's samples run only to F_b (Algorithm 2 line 3); the measured rule's samples and the grid to the
    # target; with --tradeoff both rules' samples are needed
    paper_pairs = pairs if rule == "paper" else ([tuple(p) for p in luo.samples] if tradeoff is not None else [])
    measured_pairs = pairs if rule == "measured" else ([tuple(p) for p in luo.measured_samples] if tradeoff is not None else [])
    cache.prefetch_plan([((k, e, s), (fa, fb)) for k, e in paper_pairs for s in seed_list]
                        + [((k, e, s), (ft,)) for k, e in measured_pairs for s in seed_list]
                        + [((k, e, s), (ft,)) for k, e in sorted(grid_designs) for s in seed_list], jobs=jobs)  # fmt: skip
    per_seed = seed_costs(base, seed_list)
    costs = mean_costs(base, rows=per_seed)
    est = estimate_ratio(cache, paper_pairs, f_a=fa, f_b=fb, seeds=seed_list) if paper_pairs else None
    fit = fit_measured(cache, measured_pairs, target=ft, seeds=seed_list) if measured_pairs else None
    out: dict = {"rule": rule}
    if rule == "paper":
        d = design_ke(cache, per_seed, est, gamma=gamma, target=ft, seeds=seed_list)
        out.update(_paper_fields(d, est))
    else:
        d = design_measured(cache, per_seed, fit, gamma=gamma, target=ft, seeds=seed_list, refine=refine)
        out.update(_measured_fields(d, fit, gamma, refine))
    out.update({
        "gamma": gamma, "rounds": d.outcome.rounds, "time_s": d.outcome.time_s, "energy_j": d.outcome.energy_j,
        "reached": d.outcome.reached, "f_a": fa, "f_b": fb, "f_target": ft, "seeds": seeds,
        "costs_source": costs.source, **costs.means(),
    })  # fmt: skip
    grid = None
    if exhaustive:
        grid = grid_table(cache, gk, ge, target=ft, seeds=seed_list)
        out.update(_grid_fields(grid, grid_optimum(grid, gamma), d.cost, gamma))
    if tradeoff is not None:
        table = tradeoff_table(cache, per_seed, target=ft, seeds=seed_list, paper=est, measured=fit, grid=grid,
                               refine=refine, jobs=jobs)  # fmt: skip
        csv_path, html_path = write_tradeoff(table, tradeoff, title=f"{base.name}: time-energy trade-off")
        out.update(tradeoff_csv=str(csv_path), tradeoff_html=str(html_path))
    out.update(simulated_runs=cache.simulated, runs_wall_s=cache.wall_s)
    return out


def _paper_fields(d, est) -> dict:
    """The ``--rule paper`` part of the result: Luo et al.'s design ``d`` and the samples behind A0/B0 in ``est``."""
    return {
        "K": d.k, "E": d.e, "overhead": d.overhead, "cost": d.cost, "a0_over_b0": d.a0_over_b0,
        "overhead_iterations": d.overhead_iterations, "K_cont": d.k_cont, "E_cont": d.e_cont,
        "predicted_time_s": d.predicted_time_s, "predicted_energy_j": d.predicted_energy_j,
        "samples": [{"K": r.k, "E": r.e, "R_a": r.r_a, "R_b": r.r_b} for r in est.samples],
    }  # fmt: skip


def _measured_fields(d, fit, gamma: float, refine: int) -> dict:
    """The ``--rule measured`` part of the result: design ``d``, the rounds model ``fit`` and its samples, the
    confirmation runs."""
    f = fit.fit
    return {
        "K": d.k, "E": d.e, "overhead": d.overhead, "cost": d.cost,
        "fit": {"model": "ln R = a + b/E + c K^-p", "a": f.a, "b": f.b, "c": f.c, "p": f.p, "rms_log": f.rms_log,
                "holdout_error": f.holdout_error, "holdout_errors": list(f.holdout_errors)},
        "K_predicted": d.predicted.k, "E_predicted": d.predicted.e, "predicted_rounds": d.predicted.rounds,
        "predicted_cost": d.predicted.cost, "refine": refine,
        "confirmed": [{"K": o.k, "E": o.e, "rounds": o.rounds, "cost": o.cost(gamma)} for o in d.confirmed],
        "samples": [{"K": r.k, "E": r.e, "R": r.rounds, "R_fit": float(f.rounds(r.k, r.e))} for r in fit.samples],
    }  # fmt: skip


def _grid_fields(grid, best, cost: float, gamma: float) -> dict:
    """The ``--exhaustive`` part of the result: the grid optimum ``best``, the chosen design's relative excess of
    ``cost`` over it and every grid design."""
    return {
        "K_opt": best.k, "E_opt": best.e, "cost_opt": best.cost(gamma),
        "optimality_error": cost / best.cost(gamma) - 1.0,
        "grid": [{"K": o.k, "E": o.e, "rounds": o.rounds, "time_s": o.time_s, "energy_j": o.energy_j,
                  "reached": o.reached, "cost": o.cost(gamma)} for o in grid],
    }  # fmt: skip


def _print_table(r: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    name = "Luo et al. Algorithm 2" if r["rule"] == "paper" else "measured rule"
    detail = (f"A0/B0={r['a0_over_b0']:.4g}" if r["rule"] == "paper"
              else "ln R = {a:.3g} + {b:.3g}/E + {c:.3g} K^-{p:.3g}".format(**r["fit"]))  # fmt: skip
    table = Table(title=f"{name}: gamma={r['gamma']:g}, {detail}, target loss {r['f_target']:g}")
    for column in ("", "K", "E", "rounds", "time [s]", "energy [J]", "cost"):
        table.add_column(column, justify="right")
    table.add_row(name, str(r["K"]), str(r["E"]), f"{r['rounds']:.1f}", f"{r['time_s']:.4g}",
                  f"{r['energy_j']:.4g}", f"{r['cost']:.4g}")  # fmt: skip
    if "K_opt" in r:
        best = next(g for g in r["grid"] if g["K"] == r["K_opt"] and g["E"] == r["E_opt"])
        table.add_row("grid optimum", str(r["K_opt"]), str(r["E_opt"]), f"{best['rounds']:.1f}",
                      f"{best['time_s']:.4g}", f"{best['energy_j']:.4g}", f"{r['cost_opt']:.4g}")  # fmt: skip
    console.print(table)
    lines = [f"overhead: {r['overhead']:.3f} x the chosen design's cost (sampled and confirmation runs)"]
    if r["rule"] == "paper":
        lines.append(f"estimation overhead (eq. 26): {r['overhead_iterations']:.3f} of the final run's iterations")
    else:
        lines.append(f"rounds model: held-out error {100 * r['fit']['holdout_error']:.1f}% (largest, leave-one-out), "
                     f"predicted {r['predicted_rounds']:.1f} rounds, measured {r['rounds']:.1f}")  # fmt: skip
    if "optimality_error" in r:
        lines.append(f"optimality error: {100 * r['optimality_error']:.2f}%")
    if "tradeoff_csv" in r:
        lines.append(f"trade-off: {r['tradeoff_csv']}, {r['tradeoff_html']}")
    for line in lines:
        console.print(line, markup=False)
