"""Packet errors, transmit power and the joint user selection / resource-block assignment of Chen, Yang, Saad,
Yin, Poor and Cui, "A Joint Learning and Communications Framework for Federated Learning over Wireless
Networks" (IEEE TWC 20(1):269-283, 2021).

The paper's full text was not readable; the model follows the implementation notes
(shared/papers/wireless_allocation.md, Chen §3, §6, §7 and §11), whose equation numbers come from comments of a
third-party reproduction [REPRO there]. All quantities are SI: powers [W], bandwidth [Hz], noise PSD [W/Hz],
bits [bit], times [s], energies [J]; channel gains are linear.

Channel. The mean channel of the official code (fading ignored, notes §3 and §11.3): user i on uplink resource
block (RB) n with transmit power P sees the SINR ``P h_i / (I_n + B N0)``, the rate

    r_in(P) = B log2(1 + P h_i / (I_n + B N0))                                   (eq. (5), notes §3)

(noise kept in the rate, as the paper writes it; the code leaves it out), the packet error rate

    q_in(P) = 1 - exp(-m (I_n + B N0) / (P h_i))                                 (eq. (9), notes §3)

and the energy ``e_in(P) = E_cmp,i + P Z(w) / r_in(P)`` (eq. (10)); the computation energy ``E_cmp,i``
(``sigma omega theta^2 Z(X_i)``) is the caller's, so the unit question of notes §11.1 stays with the caller.

Power (Proposition 2 per the notes, §6). q_in and the upload time fall as P rises and e_in rises with P, so the
best power of a pair is the largest the energy budget allows: ``P* = P_max`` when ``e_in(P_max) <= gamma_E``,
else the root of ``e_in(P) = gamma_E`` on (0, P_max) (brentq), and the pair is infeasible when even
``e_in(0+) = E_cmp,i + Z(w) (I_n + B N0) ln2 / (B h_i) > gamma_E``. A pair is feasible when at P* both
``Z(w)/r_in + l_i^D <= gamma_T`` (non-strict, notes §11.10) and ``e_in <= gamma_E`` hold.

Assignment (eqs. (23)-(24), notes §7). Minimise the convergence-bound surrogate

    J = sum_i K_i (1 - a_i + a_i q_i)        (notes §5: data left out or lost to packet errors)

over one-to-one matchings of users to RBs; equivalently minimise ``sum r_in psi_in`` with
``psi_in = K_i (q_in - 1) <= 0`` (eq. (24)). Choices where the notes leave room, taken here:

- *minimise J* (the same as maximising the expected number of samples received, ``sum_i K_i a_i (1 - q_i)``);
- an *infeasible pair is forbidden* (cost +inf, never assigned), not weighted 0 as in the code (notes §7 step 4);
- an *unassigned user* contributes K_i to J (q = 1): each user may instead take a private "unassigned" column of
  cost 0, so the rectangular U x (R + U) matrix always has a complete matching and
  ``scipy.optimize.linear_sum_assignment`` solves (23) exactly for any U, R and feasibility pattern;
- a user matched to a feasible RB with ``psi_in = 0`` (``q_in == 1`` in floating point, or K_i = 0) is dropped:
  it would change nothing in J and only spend energy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import brentq, linear_sum_assignment

from optimizers import _checks as chk
from optimizers.errors import OptimizerInputError

__all__ = [
    "ChenAssignment",
    "chen_assignment",
    "assign_users_to_rbs",
    "optimal_power_w",
    "packet_error_rate",
    "uplink_energy_j",
]

_LN2 = math.log(2.0)


def _nonneg(value: Any, name: str) -> np.ndarray:
    arr = chk.real_array(value, name)
    return chk.require(arr, name, arr >= 0, "must be >= 0")


def packet_error_rate(
    power_w: Any,
    gain: Any,
    interference_w: Any,
    *,
    rb_bandwidth_hz: float,
    noise_psd_w_per_hz: float,
    waterfall: float,
) -> np.ndarray:
    """Chen et al.'s packet error rate on the mean channel, eq. (9) as the notes give it (§3):

        q = 1 - exp(-m (I + B N0) / (P h))

    ``power_w`` P [W], ``gain`` h (linear), ``interference_w`` I [W] broadcast against each other (e.g. P and h
    of shape (U, 1) against I of shape (R,) for a users x RBs table); ``rb_bandwidth_hz`` B [Hz],
    ``noise_psd_w_per_hz`` N0 [W/Hz] and the waterfall threshold ``waterfall`` m (linear; the paper quotes
    0.023 dB, the code uses 1.08, notes §9 and §11.2). At ``P h = 0`` the packet is always lost (q = 1, the
    limit); with ``I + B N0 = 0`` and ``P h > 0`` it always arrives (q = 0).
    """
    p = _nonneg(power_w, "power_w")
    h = _nonneg(gain, "gain")
    i_w = _nonneg(interference_w, "interference_w")
    b = chk.positive(rb_bandwidth_hz, "rb_bandwidth_hz")
    n0 = chk.at_least(noise_psd_w_per_hz, "noise_psd_w_per_hz", 0.0)
    m = chk.positive(waterfall, "waterfall")
    try:
        p, h, i_w = np.broadcast_arrays(p, h, i_w)
    except ValueError:
        raise OptimizerInputError(
            f"power_w, gain, interference_w: shapes {np.shape(p)}, {np.shape(h)}, {np.shape(i_w)} do not broadcast"
        ) from None
    received = p * h
    with np.errstate(divide="ignore", invalid="ignore"):
        exponent = np.where(received > 0, m * (i_w + b * n0) / np.where(received > 0, received, 1.0), np.inf)
    return -np.expm1(-exponent)


def _checked_link(gain, interference_w, rb_bandwidth_hz, noise_psd_w_per_hz, model_bits, compute_energy_j) -> tuple:
    """One pair's link and workload, checked, in the order :func:`_energy` and :func:`_best_power` take them."""
    return (
        chk.positive(gain, "gain"),
        chk.at_least(interference_w, "interference_w", 0.0),
        chk.positive(rb_bandwidth_hz, "rb_bandwidth_hz"),
        chk.at_least(noise_psd_w_per_hz, "noise_psd_w_per_hz", 0.0),
        chk.positive(model_bits, "model_bits"),
        chk.at_least(compute_energy_j, "compute_energy_j", 0.0),
    )


def _energy(p: float, h: float, i_w: float, b: float, n0: float, bits: float, e_cmp: float) -> float:
    """e(P) = E_cmp + P Z / (B log2(1 + P h / (I + B N0))), with its finite limit at P = 0."""
    denominator = i_w + b * n0
    if p == 0.0:
        return e_cmp + bits * denominator * _LN2 / (b * h)
    return e_cmp + p * bits * _LN2 / (b * math.log1p(p * h / denominator))


def uplink_energy_j(
    power_w: float,
    gain: float,
    interference_w: float,
    *,
    rb_bandwidth_hz: float,
    noise_psd_w_per_hz: float,
    model_bits: float,
    compute_energy_j: float = 0.0,
) -> float:
    """e(P) [J] of one user on one RB, eq. (10) per the notes: ``compute_energy_j + P Z(w) / r(P)`` with the rate
    of eq. (5); at P = 0 its limit ``compute_energy_j + Z(w) (I + B N0) ln2 / (B h)``."""
    link = _checked_link(gain, interference_w, rb_bandwidth_hz, noise_psd_w_per_hz, model_bits, compute_energy_j)
    return _energy(chk.at_least(power_w, "power_w", 0.0), *link)


def _best_power(h, i_w, b, n0, bits, e_cmp, p_max, e_max) -> float:
    """P* of one pair (module docstring), or nan when even P -> 0 breaks the energy budget."""
    if _energy(p_max, h, i_w, b, n0, bits, e_cmp) <= e_max:
        return p_max
    if not _energy(0.0, h, i_w, b, n0, bits, e_cmp) < e_max:
        return math.nan
    p = brentq(lambda x: _energy(x, h, i_w, b, n0, bits, e_cmp) - e_max, 0.0, p_max, xtol=1e-300, rtol=1e-15)
    while p > 0.0 and _energy(p, h, i_w, b, n0, bits, e_cmp) > e_max:  # stay on the feasible side of the root
        p = math.nextafter(p, 0.0)
    return p


def optimal_power_w(
    gain: float,
    interference_w: float,
    *,
    p_max_w: float,
    energy_budget_j: float,
    rb_bandwidth_hz: float,
    noise_psd_w_per_hz: float,
    model_bits: float,
    compute_energy_j: float = 0.0,
) -> float:
    """The largest transmit power P* [W] in [0, p_max_w] with ``e(P) <= energy_budget_j`` (Proposition 2 per the
    notes, §6), or ``nan`` when no P > 0 meets the budget."""
    link = _checked_link(gain, interference_w, rb_bandwidth_hz, noise_psd_w_per_hz, model_bits, compute_energy_j)
    return _best_power(*link, chk.positive(p_max_w, "p_max_w"), chk.positive(energy_budget_j, "energy_budget_j"))


def assign_users_to_rbs(samples: Any, error_rate: Any, feasible: Any) -> tuple[np.ndarray, float]:
    """Problem (23) on a given table: ``samples`` K_i (U,), ``error_rate`` q_in (U, R) in [0, 1] and ``feasible``
    (U, R) booleans. Returns ``(rb, J)``: ``rb[i]`` the RB of user i or -1 when unassigned, and the least
    ``J = sum_i K_i (1 - a_i + a_i q_i)`` (choices as in the module docstring: infeasible pairs forbidden,
    unassigned users count K_i, matches with psi = 0 dropped)."""
    k = chk.one_dimensional(samples, "samples")
    chk.require(k, "samples", k >= 0, "must be >= 0")
    q = chk.real_array(error_rate, "error_rate")
    if q.ndim != 2 or q.shape[0] != k.size or q.shape[1] < 1:
        raise OptimizerInputError(f"error_rate: shape {q.shape}: must be (users={k.size}, RBs >= 1)")
    chk.require(q, "error_rate", (q >= 0) & (q <= 1), "must be in [0, 1]")
    ok = np.asarray(feasible)
    if ok.shape != q.shape or ok.dtype != bool:
        raise OptimizerInputError(f"feasible: shape {ok.shape}, dtype {ok.dtype}: must be booleans of shape {q.shape}")
    users, rbs = q.shape
    psi = k[:, None] * (q - 1.0)  # eq. (24), <= 0
    cost = np.full((users, rbs + users), np.inf)
    cost[:, :rbs] = np.where(ok, psi, np.inf)
    cost[np.arange(users), rbs + np.arange(users)] = 0.0  # user i's own "unassigned" column
    rows, cols = linear_sum_assignment(cost)
    rb = np.full(users, -1)
    for i, n in zip(rows, cols):
        if n < rbs and psi[i, n] < 0:
            rb[i] = n
    chosen = rb >= 0
    j = float(np.sum(k) + np.sum(psi[chosen, rb[chosen]]))
    return rb, j


@dataclass(frozen=True)
class ChenAssignment:
    """The joint selection and RB assignment. Per-user arrays in the input's order.

    ``rb``: the RB of each user, -1 when not selected; ``power_w`` [W], ``error_rate`` q_i, ``upload_s`` [s] and
    ``energy_j`` [J] of each user on its RB (nan when not selected); ``objective`` J = sum_i K_i (1 - a_i + a_i q_i)
    (least over all assignments); ``received_samples`` = sum_i K_i - J, the expected samples that arrive.
    ``power_table_w``, ``error_table``, ``feasible`` (users x RBs): P*_in (nan where no power meets the energy
    budget), q_in at P*_in (1 there) and the feasibility of each pair.
    """

    rb: np.ndarray
    power_w: np.ndarray
    error_rate: np.ndarray
    upload_s: np.ndarray
    energy_j: np.ndarray
    objective: float
    received_samples: float
    power_table_w: np.ndarray
    error_table: np.ndarray
    feasible: np.ndarray

    @property
    def selected(self) -> np.ndarray:
        """a_i: whether each user is selected."""
        return self.rb >= 0


def _per_user(value: Any, name: str, users: int) -> np.ndarray:
    arr = _nonneg(value, name)
    if arr.ndim == 0:
        return np.full(users, float(arr))
    if arr.shape != (users,):
        raise OptimizerInputError(f"{name}: shape {arr.shape}: must be a scalar or ({users},)")
    return arr


def chen_assignment(
    samples: Any,
    gain: Any,
    interference_w: Any,
    *,
    p_max_w: float,
    rb_bandwidth_hz: float,
    noise_psd_w_per_hz: float,
    waterfall: float,
    model_bits: float,
    delay_budget_s: float,
    energy_budget_j: float,
    downlink_delay_s: Any = 0.0,
    compute_energy_j: Any = 0.0,
) -> ChenAssignment:
    """Chen et al.'s user selection, RB assignment and power (module docstring; notes §6-§7).

    ``samples`` K_i (U,); ``gain`` h_i (U,) linear, or (U, R) for a gain per RB; ``interference_w`` I_n [W] (R,);
    ``p_max_w`` [W]; ``rb_bandwidth_hz`` B^U [Hz]; ``noise_psd_w_per_hz`` N0 [W/Hz]; ``waterfall`` m (linear);
    ``model_bits`` Z(w) [bit]; ``delay_budget_s`` gamma_T [s]; ``energy_budget_j`` gamma_E [J];
    ``downlink_delay_s`` l_i^D [s] and ``compute_energy_j`` E_cmp,i [J]. ``p_max_w``, ``energy_budget_j``,
    ``downlink_delay_s`` and ``compute_energy_j`` are scalars or (U,) (a device's own cap and budget).
    """
    k = chk.one_dimensional(samples, "samples")
    chk.require(k, "samples", k >= 0, "must be >= 0")
    users = k.size
    i_w = chk.one_dimensional(interference_w, "interference_w")
    chk.require(i_w, "interference_w", i_w >= 0, "must be >= 0")
    rbs = i_w.size
    h = chk.real_array(gain, "gain")
    if h.shape == (users,):
        h = np.repeat(h[:, None], rbs, axis=1)
    if h.shape != (users, rbs):
        raise OptimizerInputError(f"gain: shape {h.shape}: must be ({users},) or ({users}, {rbs})")
    chk.require(h, "gain", h > 0, "must be > 0")
    p_max = _per_user(p_max_w, "p_max_w", users)
    chk.require(p_max, "p_max_w", p_max > 0, "must be > 0")
    b = chk.positive(rb_bandwidth_hz, "rb_bandwidth_hz")
    n0 = chk.at_least(noise_psd_w_per_hz, "noise_psd_w_per_hz", 0.0)
    m = chk.positive(waterfall, "waterfall")
    bits = chk.positive(model_bits, "model_bits")
    t_max = chk.positive(delay_budget_s, "delay_budget_s")
    e_max = _per_user(energy_budget_j, "energy_budget_j", users)
    chk.require(e_max, "energy_budget_j", e_max > 0, "must be > 0")
    t_down = _per_user(downlink_delay_s, "downlink_delay_s", users)
    e_cmp = _per_user(compute_energy_j, "compute_energy_j", users)

    power = np.full((users, rbs), np.nan)
    for i in range(users):
        for n in range(rbs):
            power[i, n] = _best_power(h[i, n], i_w[n], b, n0, bits, e_cmp[i], p_max[i], e_max[i])
    has_power = np.isfinite(power) & (power > 0)
    p_safe = np.where(has_power, power, 1.0)
    snr = p_safe * h / (i_w[None, :] + b * n0)
    with np.errstate(divide="ignore"):
        upload = np.where(has_power, bits * _LN2 / (b * np.log1p(snr)), np.inf)
    energy = np.where(has_power, e_cmp[:, None] + p_safe * upload, np.inf)
    q = np.where(
        has_power,
        packet_error_rate(p_safe, h, i_w[None, :], rb_bandwidth_hz=b, noise_psd_w_per_hz=n0, waterfall=m),
        1.0,
    )
    feasible = has_power & (upload + t_down[:, None] <= t_max) & (energy <= e_max[:, None])

    rb, j = assign_users_to_rbs(k, q, feasible)
    chosen = rb >= 0
    idx = (np.flatnonzero(chosen), rb[chosen])

    def pick(table: np.ndarray) -> np.ndarray:
        out = np.full(users, np.nan)
        out[chosen] = table[idx]
        return out

    return ChenAssignment(
        rb=rb,
        power_w=pick(power),
        error_rate=pick(q),
        upload_s=pick(upload),
        energy_j=pick(energy),
        objective=j,
        received_samples=float(np.sum(k) - j),
        power_table_w=power,
        error_table=q,
        feasible=feasible,
    )
