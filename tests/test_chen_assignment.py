"""Chen et al.'s packet errors, power and assignment (optimizers/chen_assignment.py): eq. (9) by hand, the power of
Proposition 2 against a grid, and the Hungarian assignment against two exhaustive searches on random small
instances (issue #36, points 4 and 5; notes, Chen §12.1-§12.2).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from optimizers.chen_assignment import (
    assign_users_to_rbs,
    chen_assignment,
    optimal_power_w,
    packet_error_rate,
    uplink_energy_j,
)
from optimizers.errors import OptimizerInputError

N_INSTANCES = 200
# The notes' Table-II values (Chen §9): 10 dBm, 1 MHz RBs, -174 dBm/Hz, m = 1.08 (code), 39 760 x 16 bit.
PHY = dict(p_max_w=0.01, rb_bandwidth_hz=1e6, noise_psd_w_per_hz=10 ** (-20.4), waterfall=1.08, model_bits=636_160.0)


# --- eq. (9) -----------------------------------------------------------------------------------------------


def test_packet_error_rate_by_hand():
    # m (I + B N0) / (P h) = 2 (9e-8 + 1e6 * 1e-14) / (0.01 * 2e-5) = 2e-7 / 2e-7 = 1  ->  q = 1 - 1/e
    q = packet_error_rate(0.01, 2e-5, 9e-8, rb_bandwidth_hz=1e6, noise_psd_w_per_hz=1e-14, waterfall=2.0)
    assert q == pytest.approx(1 - math.exp(-1), rel=1e-14)
    # exponent 0.5: twice the received power
    q = packet_error_rate(0.02, 2e-5, 9e-8, rb_bandwidth_hz=1e6, noise_psd_w_per_hz=1e-14, waterfall=2.0)
    assert q == pytest.approx(1 - math.exp(-0.5), rel=1e-14)
    # P h -> inf: q ~ exponent = 2e-7 / 1e6 = 2e-13 -> 0 (kept to full relative precision); P h = 0: q = 1
    q = packet_error_rate([1e6, 0.0], 1.0, 9e-8, rb_bandwidth_hz=1e6, noise_psd_w_per_hz=1e-14, waterfall=2.0)
    assert q[0] == pytest.approx(2e-13, rel=1e-9) and q[1] == 1.0


def test_packet_error_rate_broadcasts_users_by_rbs():
    p, h, i_w = np.array([[0.01], [0.005]]), np.array([[1e-5], [4e-5]]), np.array([1e-8, 5e-8, 1e-7])
    q = packet_error_rate(p, h, i_w, rb_bandwidth_hz=1e6, noise_psd_w_per_hz=0.0, waterfall=1.0)
    assert q.shape == (2, 3)
    assert q == pytest.approx(1 - np.exp(-i_w[None, :] / (p * h)), rel=1e-14)
    assert np.all(np.diff(q, axis=1) > 0)  # more interference, more errors


def test_packet_error_rate_refuses_bad_input():
    kw = dict(rb_bandwidth_hz=1e6, noise_psd_w_per_hz=1e-20, waterfall=1.0)
    with pytest.raises(OptimizerInputError, match=r"power_w\[1\]=-1.0: must be >= 0"):
        packet_error_rate([0.1, -1.0], 1e-5, 1e-8, **kw)
    with pytest.raises(OptimizerInputError, match="waterfall=0.0: must be > 0"):
        packet_error_rate(0.1, 1e-5, 1e-8, rb_bandwidth_hz=1e6, noise_psd_w_per_hz=0.0, waterfall=0.0)
    with pytest.raises(OptimizerInputError, match="do not broadcast"):
        packet_error_rate([0.1, 0.2], 1e-5, [1e-8, 1e-8, 1e-8], **kw)


# --- Proposition 2: the largest power within the energy budget ----------------------------------------------


@pytest.mark.parametrize("gain", [1e-4, 2.5e-5, 1.6e-5, 1e-6])  # P_max, two binding budgets, none
def test_optimal_power_against_a_grid(gain):
    """Notes §12.2: the largest grid power with e(P) <= gamma_E is within one grid step below P*, and q(P*) is the
    least q over the feasible grid."""
    kw = dict(rb_bandwidth_hz=1e6, noise_psd_w_per_hz=10 ** (-20.4), model_bits=636_160.0, compute_energy_j=1e-4)
    p_star = optimal_power_w(gain, 1e-7, p_max_w=0.01, energy_budget_j=0.003, **kw)
    grid = np.linspace(1e-9, 0.01, 100_001)
    energy = 1e-4 + grid * 636_160.0 / (1e6 * np.log2(1 + grid * gain / (1e-7 + 1e6 * 10 ** (-20.4))))  # eq. (10)
    ok = energy <= 0.003
    if not ok.any():
        assert math.isnan(p_star)
        return
    assert uplink_energy_j(p_star, gain, 1e-7, **kw) <= 0.003
    assert grid[ok].max() <= p_star < grid[ok].max() + (grid[1] - grid[0]) + 1e-15
    if p_star < 0.01:  # the budget binds: one ulp more breaks it
        assert uplink_energy_j(math.nextafter(p_star, 1.0), gain, 1e-7, **kw) > 0.003 * (1 - 1e-12)
    q = packet_error_rate(np.append(grid[ok], p_star), gain, 1e-7, rb_bandwidth_hz=1e6,
                          noise_psd_w_per_hz=10 ** (-20.4), waterfall=1.08)  # fmt: skip
    assert q[-1] <= q[:-1].min()


# --- problem (23) against exhaustive search ---------------------------------------------------------------


def j_of(samples, q, rb) -> float:
    """J = sum_i K_i (1 - a_i + a_i q_i), straight from the definition."""
    return float(sum(k * (q[i, rb[i]] if rb[i] >= 0 else 1.0) for i, k in enumerate(samples)))


def best_by_permutations(samples, q, feasible) -> float:
    """Every permutation of a max(U, R) square: user i on column perm[i] counts as assigned only where that is a
    real, feasible RB (else as unassigned), so each permutation is a partial matching on feasible edges and every
    such matching is reached by some permutation."""
    users, rbs = q.shape
    size = max(users, rbs)
    best = math.inf
    for perm in itertools.permutations(range(size)):
        rb = [n if n < rbs and feasible[i, n] else -1 for i, n in enumerate(perm[:users])]
        best = min(best, j_of(samples, q, rb))
    return best


def best_by_matchings(samples, q, feasible) -> tuple[float, int]:
    """Every partial one-to-one matching on feasible edges, built user by user (notes §12.1); also their count."""
    users, rbs = q.shape
    best, count = math.inf, 0

    def walk(i, used, rb):
        nonlocal best, count
        if i == users:
            count += 1
            best = min(best, j_of(samples, q, rb))
            return
        walk(i + 1, used, rb + [-1])
        for n in range(rbs):
            if feasible[i, n] and n not in used:
                walk(i + 1, used | {n}, rb + [n])

    walk(0, frozenset(), [])
    return best, count


def random_instance(rng: np.random.Generator) -> dict:
    """1-6 users at 20-400 m (h = d^-2, notes §9), 1-6 RBs with 1e-8..1.1e-7 W of interference, K_i of 100-600
    samples, 10-60 ms of downlink and up to 0.5 mJ of computation, under gamma_T = 0.5 s and gamma_E = 3 mJ:
    a mix of pairs at P_max, pairs where the energy budget lowers P, and infeasible pairs."""
    users, rbs = int(rng.integers(1, 7)), int(rng.integers(1, 7))
    return dict(
        samples=rng.choice([100, 200, 300, 400, 500, 600], users).astype(float),
        gain=rng.uniform(20, 400, users) ** -2.0,
        interference_w=rng.uniform(0.01, 0.11, rbs) * 1e-6,
        delay_budget_s=0.5,
        energy_budget_j=0.003,
        downlink_delay_s=rng.uniform(0.01, 0.06, users),
        compute_energy_j=rng.uniform(0, 5e-4, users),
        **PHY,
    )


def test_assignment_against_exhaustive_search():
    rng = np.random.default_rng(36)
    worst_gap, stats = 0.0, dict(partly_infeasible=0, user_without_rb=0, power_below_max=0, more_users=0,
                                 fewer_users=0, matchings=0)  # fmt: skip
    for _ in range(N_INSTANCES):
        inst = random_instance(rng)
        res = chen_assignment(**inst)
        k, q, ok = inst["samples"], res.error_table, res.feasible
        users, rbs = q.shape
        # the answer is a matching on feasible edges, and meets (11c) and (11d) on each selected edge
        chosen = res.rb >= 0
        assert len(set(res.rb[chosen])) == chosen.sum()
        assert np.all(ok[np.flatnonzero(chosen), res.rb[chosen]])
        assert np.all(res.upload_s[chosen] + inst["downlink_delay_s"][chosen] <= inst["delay_budget_s"])
        assert np.all(res.energy_j[chosen] <= inst["energy_budget_j"])
        assert np.all(res.power_w[chosen] <= inst["p_max_w"])
        assert res.objective == pytest.approx(j_of(k, q, res.rb), rel=1e-12)
        # ... and it is optimal
        by_perm = best_by_permutations(k, q, ok)
        by_walk, count = best_by_matchings(k, q, ok)
        for ref in (by_perm, by_walk):
            gap = abs(res.objective - ref) / ref
            worst_gap = max(worst_gap, gap)
            assert gap <= 1e-12
        stats["matchings"] += count
        stats["partly_infeasible"] += int(not ok.all())
        stats["user_without_rb"] += int((~ok.any(axis=1)).any())
        stats["power_below_max"] += int(np.any(res.power_table_w < inst["p_max_w"]))
        stats["more_users"] += int(users > rbs)
        stats["fewer_users"] += int(users < rbs)
    print(f"{N_INSTANCES} instances, worst relative gap to exhaustive search {worst_gap:.2e}, {stats}")
    # the instances cover the cases of notes §12.1
    assert min(stats[s] for s in ("partly_infeasible", "user_without_rb", "power_below_max", "more_users",
                                  "fewer_users")) >= 10  # fmt: skip


def test_two_users_two_rbs_by_hand():
    k = np.array([100.0, 300.0])
    q = np.array([[0.1, 0.2], [0.3, 0.5]])
    # all pairs feasible: 100*0.1 + 300*0.5 = 160 on the diagonal, 100*0.2 + 300*0.3 = 110 crossed
    rb, j = assign_users_to_rbs(k, q, np.ones((2, 2), dtype=bool))
    assert rb.tolist() == [1, 0] and j == pytest.approx(110.0, rel=1e-15)
    # user 1 cannot use RB 0: crossed is gone; diagonal 160 beats user 0 alone on RB 1 (20 + 300)
    rb, j = assign_users_to_rbs(k, q, np.array([[True, True], [False, True]]))
    assert rb.tolist() == [0, 1] and j == pytest.approx(160.0, rel=1e-15)
    # user 1 has no feasible RB: it stays out and counts K_1 = 300 in J; user 0 takes its best RB
    rb, j = assign_users_to_rbs(k, q, np.array([[True, True], [False, False]]))
    assert rb.tolist() == [0, -1] and j == pytest.approx(310.0, rel=1e-15)


def test_infeasible_pairs_are_never_assigned_even_when_cheap():
    """Forbidden, not weighted: the code's weight 0 would let a user ride an infeasible RB (notes §7, step 4)."""
    k = np.array([500.0, 100.0, 100.0])
    q = np.array([[0.0, 0.9], [0.0, 0.9], [0.0, 0.0]])
    ok = np.array([[False, True], [False, True], [False, False]])
    rb, j = assign_users_to_rbs(k, q, ok)
    assert rb.tolist() == [1, -1, -1] and j == pytest.approx(500 * 0.9 + 200, rel=1e-15)


def test_a_user_whose_packet_is_always_lost_is_not_selected():
    rb, j = assign_users_to_rbs([100.0], np.array([[1.0]]), np.array([[True]]))
    assert rb.tolist() == [-1] and j == 100.0


def test_pipeline_hand_case():
    """Two users at 100 m and 400 m, two RBs: the far user's every pair breaks the delay budget (at P_max its SINR
    is at most 1.25, so the upload takes at least 0.54 s, and 3 mJ allows even less power), so only the near user
    is selected, on the quieter RB."""
    res = chen_assignment([200.0, 300.0], [100.0**-2, 400.0**-2], [1e-7, 5e-8], delay_budget_s=0.5,
                          energy_budget_j=0.003, **PHY)  # fmt: skip
    assert res.rb.tolist() == [1, -1]
    assert res.feasible.tolist() == [[True, True], [False, False]]
    # SINR = 0.01 * 1e-4 / (5e-8 + 1e6 * 10^-20.4) = 19.998; Z/r = 636160 / (1e6 log2(20.0)) = 0.1472 s
    assert res.upload_s[0] == pytest.approx(636_160 / (1e6 * math.log2(1 + 1e-6 / (5e-8 + 10 ** -14.4))), rel=1e-12)
    assert res.power_w[0] == 0.01 and res.energy_j[0] == pytest.approx(0.01 * res.upload_s[0], rel=1e-12)
    q0 = 1 - math.exp(-1.08 * (5e-8 + 10 ** -14.4) / 1e-6)
    assert res.error_rate[0] == pytest.approx(q0, rel=1e-12)
    assert res.objective == pytest.approx(200 * q0 + 300, rel=1e-12)
    assert res.received_samples == pytest.approx(200 * (1 - q0), rel=1e-12)
    assert res.selected.tolist() == [True, False]


def test_assignment_refuses_bad_input():
    with pytest.raises(OptimizerInputError, match=r"error_rate\[0, 1\]=1.5: must be in \[0, 1\]"):
        assign_users_to_rbs([1.0], np.array([[0.5, 1.5]]), np.ones((1, 2), dtype=bool))
    with pytest.raises(OptimizerInputError, match="feasible: shape"):
        assign_users_to_rbs([1.0], np.array([[0.5, 0.5]]), np.ones((2, 2), dtype=bool))
    with pytest.raises(OptimizerInputError, match=r"gain: shape \(3,\)"):
        chen_assignment([1.0, 2.0], [1e-4, 1e-4, 1e-4], [1e-7], delay_budget_s=0.5, energy_budget_j=0.003, **PHY)


def test_per_user_power_caps_and_energy_budgets():
    """A device's own P_max and gamma_E (a fleet draws them per device): every pair's power is Proposition 2's with
    that user's cap and budget (optimal_power_w, one pair at a time), each selected user meets its own budget, and
    the assignment is still the exhaustive optimum; 100 random instances."""
    rng = np.random.default_rng(3636)
    below_own_cap = 0
    for _ in range(100):
        inst = random_instance(rng)
        users = inst["samples"].size
        inst["p_max_w"] = rng.uniform(0.002, 0.02, users)
        inst["energy_budget_j"] = rng.uniform(0.001, 0.005, users)
        res = chen_assignment(**inst)
        for i in range(users):
            for n, i_n in enumerate(inst["interference_w"]):
                alone = optimal_power_w(
                    inst["gain"][i], i_n, p_max_w=inst["p_max_w"][i], energy_budget_j=inst["energy_budget_j"][i],
                    rb_bandwidth_hz=PHY["rb_bandwidth_hz"], noise_psd_w_per_hz=PHY["noise_psd_w_per_hz"],
                    model_bits=PHY["model_bits"], compute_energy_j=inst["compute_energy_j"][i],
                )  # fmt: skip
                assert res.power_table_w[i, n] == alone or (math.isnan(alone) and math.isnan(res.power_table_w[i, n]))
        chosen = res.rb >= 0
        assert np.all(res.energy_j[chosen] <= inst["energy_budget_j"][chosen])
        assert np.all(res.power_w[chosen] <= inst["p_max_w"][chosen])
        below_own_cap += int(np.any(res.power_w[chosen] < inst["p_max_w"][chosen]))
        ref = best_by_permutations(inst["samples"], res.error_table, res.feasible)
        assert abs(res.objective - ref) <= 1e-12 * ref
    assert below_own_cap >= 10  # budgets that bind below a user's own cap are exercised


def test_per_user_arrays_must_have_one_value_per_user():
    inst = random_instance(np.random.default_rng(1))
    users = inst["samples"].size
    with pytest.raises(OptimizerInputError, match=r"p_max_w: shape \(\d+,\): must be a scalar or"):
        chen_assignment(**{**inst, "p_max_w": np.full(users + 1, 0.01)})
    with pytest.raises(OptimizerInputError, match=r"energy_budget_j\[0\]=0.0: must be > 0"):
        chen_assignment(**{**inst, "energy_budget_j": np.zeros(users)})
