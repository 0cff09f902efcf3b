"""Performance of the optimizers (issue #4). Not run by the tests.

    python benchmarks/optimizer_speed.py            # full run (a few seconds)
    python benchmarks/optimizer_speed.py --quick    # smaller sizes, for a smoke test

AnycostFL: wall time of the vectorised closed form for 10^5 devices, mean time of the per-device geometric
program (cvxpy, Clarabel) over 100 devices, the speed-up per device, and the worst relative gap in the
learning gain between the two over 1,000 random devices (with how often the feasibility verdicts differ).

Devices are drawn over wide ranges: samples 10..5000, eps 1e-28..1e-25, f in 1e8..3e9 Hz, E_max 1e-2..1e3 J,
uplink rate from the 3GPP macro path loss (128.1 + 37.6 log10(d/km), 1 MHz, 0.1 W, -114 dBm/MHz) at
10..2000 m; T_max = 10 s, W = 3e6 cycles/sample, S = 53.23e6 bits (the FMNIST CNN).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from channel import RadioModel
from optimizers.anycost import AnycostDevices, solve_anycost, solve_anycost_gp

ANYCOST_SETTINGS = dict(t_max_s=10.0, cycles_per_sample=3e6, update_bits=53.23e6, epochs=1, alpha_min=0.25, beta_max=1 / 15)


RADIO = RadioModel()  # the defaults are Sec. V-A's: 3GPP macro, 1 MHz, -114 dBm/MHz; no shadowing, no fading
P_TX_W = 0.1


def rate_bps(distance_m: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Shannon rate, AnycostFL eq. (8), at 0.1 W (``rng`` is not drawn from: shadowing and fading are off)."""
    return RADIO.rates_bps(RADIO.gain_linear(distance_m, rng), P_TX_W)


def random_fleet(rng: np.random.Generator, n: int) -> AnycostDevices:
    def log_u(lo: float, hi: float) -> np.ndarray:
        return 10 ** rng.uniform(np.log10(lo), np.log10(hi), n)

    f_a, f_b = log_u(1e8, 3e9), log_u(1e8, 3e9)
    return AnycostDevices(
        samples=np.round(log_u(10, 5000)), eps=log_u(1e-28, 1e-25),
        f_min_hz=np.minimum(f_a, f_b), f_max_hz=np.maximum(f_a, f_b), e_max_j=log_u(1e-2, 1e3),
        rate_bps=rate_bps(rng.uniform(10, 2000, n), rng), p_tx_w=np.full(n, P_TX_W),
    )  # fmt: skip


def _best_of(repeats: int, fn) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def bench_anycost(n_closed: int, n_gp: int, n_gap: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    fleet = random_fleet(rng, n_closed)
    closed_s = _best_of(5, lambda: solve_anycost(fleet, **ANYCOST_SETTINGS))
    print(f"closed form, {n_closed} devices: {closed_s:.3f} s ({closed_s / n_closed * 1e6:.2f} us per device, best of 5)")

    small = random_fleet(rng, n_gp)
    solve_anycost_gp(random_fleet(rng, 1), **ANYCOST_SETTINGS)  # build and compile the parametrised GP once
    gp_s = _best_of(3, lambda: solve_anycost_gp(small, **ANYCOST_SETTINGS))
    gp_per_device = gp_s / n_gp
    print(f"GP (cvxpy + Clarabel), per device, mean of {n_gp} devices: {gp_per_device * 1e3:.2f} ms (best of 3)")
    print(f"speed-up per device: {gp_per_device / (closed_s / n_closed):.0f}x")

    gap_fleet = random_fleet(rng, n_gap)
    closed = solve_anycost(gap_fleet, **ANYCOST_SETTINGS)
    gp = solve_anycost_gp(gap_fleet, **ANYCOST_SETTINGS)
    both = closed.feasible & gp.feasible
    gap = np.abs(closed.gain[both] - gp.gain[both]) / gp.gain[both]
    worst = float(gap.max()) if both.any() else 0.0
    differ = int(np.sum(closed.feasible != gp.feasible))
    print(
        f"worst relative gain gap, {n_gap} random devices: {worst:.2e} "
        f"(median {float(np.median(gap)) if both.any() else 0.0:.1e}; {int(both.sum())} feasible; "
        f"feasibility verdicts differ on {differ})"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    args = parser.parse_args(argv)
    if args.quick:
        bench_anycost(n_closed=10_000, n_gp=20, n_gap=100)
    else:
        bench_anycost(n_closed=100_000, n_gp=100, n_gap=1_000)


if __name__ == "__main__":
    main()
