"""The radio and the AnycostFL optimizer without the simulator: a table of devices in, knobs out.

Places 12 devices in AnycostFL's 550 m cell (Sec. V-A: 3GPP macro path loss, 1 MHz each, 0.1 W,
-114 dBm/MHz), computes each device's uplink rate with `channel`, then asks `optimizers.anycost` for the
width alpha, compression beta and CPU frequency f that maximise the learning gain alpha^4 beta under a
10 s deadline and a per-device energy budget (eqs. 10, 19-26), and checks every device against the
geometric-program reference. The FMNIST CNN's update is 53.23 Mb; the cycles per sample (3e6) and the
frequency range are illustrative choices, not the paper's (it gives none).

    .venv/bin/python examples/anycost_from_a_table.py
"""

from __future__ import annotations

import numpy as np

from channel import RadioModel, distances_m, uniform_disk
from optimizers.anycost import AnycostDevices, solve_anycost, solve_gp


def main() -> None:
    rng = np.random.default_rng(2023)
    n = 12
    d_m = distances_m(uniform_disk(rng, n, radius_m=550.0, min_distance_m=10.0))
    radio = RadioModel()  # defaults are AnycostFL's: 3GPP macro, 1 MHz per device, -114 dBm/MHz
    rate_bps = radio.rates_bps(radio.gain_linear(d_m, rng), 0.1)
    devices = AnycostDevices(
        samples=np.full(n, 1000.0),
        eps=rng.uniform(5e-27, 1e-26, n),  # AnycostFL Sec. V-A
        f_min_hz=np.full(n, 0.2e9),
        f_max_hz=rng.uniform(1.0e9, 2.0e9, n),
        e_max_j=rng.uniform(1.5, 4.5, n),  # FMNIST: half of U[3, 9] J
        rate_bps=rate_bps,
        p_tx_w=np.full(n, 0.1),
    )
    settings = dict(t_max_s=10.0, cycles_per_sample=3e6, update_bits=53.23e6)
    sol = solve_anycost(devices, **settings)
    ref = solve_gp(devices, **settings)
    print(f"{'dev':>3} {'dist m':>7} {'rate Mb/s':>9} {'E_max J':>7} {'alpha':>6} {'beta':>7} {'f GHz':>6} "
          f"{'t s':>6} {'E J':>6} {'weight':>6}  GP gap")  # fmt: skip
    for i in range(n):
        if not sol.feasible[i]:
            print(f"{i:>3} {d_m[i]:7.0f} {rate_bps[i] / 1e6:9.2f} {devices.e_max_j[i]:7.2f}  infeasible: {sol.reason[i]}")
            continue
        t = sol.t_cmp_s[i] + sol.t_com_s[i]
        e = sol.e_cmp_j[i] + sol.e_com_j[i]
        gap = abs(sol.gain[i] - ref.gain[i]) / ref.gain[i]
        print(f"{i:>3} {d_m[i]:7.0f} {rate_bps[i] / 1e6:9.2f} {devices.e_max_j[i]:7.2f} {sol.alpha[i]:6.3f} "
              f"{sol.beta[i]:7.4f} {sol.f_hz[i] / 1e9:6.3f} {t:6.2f} {e:6.2f} {sol.weights[i]:6.3f}  {gap:.1e}")  # fmt: skip


if __name__ == "__main__":
    main()
