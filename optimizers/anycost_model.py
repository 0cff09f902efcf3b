"""AnycostFL per-device problem: inputs, outputs and cost model (Li et al., INFOCOM 2023, Sec. IV-A).

One round of AnycostFL asks every device ``i`` for a model shrinking factor ``alpha``, a gradient
compression rate ``beta`` and a CPU frequency ``f`` [Hz]. With ``c = tau * D * W`` CPU cycles for the full
model and ``s = S / r`` seconds to send the full update, the cost model is

- computation, eqs. (6)-(7): ``T_cmp = c * alpha / f`` [s],  ``E_cmp = eps * f**2 * c * alpha`` [J], and with a
  static (idle) platform power ``P_static`` [W] drawn while computing (an extension, not in the paper):
  ``E_cmp = (P_static + eps * f**3) * T_cmp = P_static * c * alpha / f + eps * f**2 * c * alpha`` [J]
- communication, eq. (9):    ``T_com = alpha * beta * s`` [s], ``E_com = P * T_com`` [J]

and problem (P3), eq. (19), maximises the learning gain ``alpha**4 * beta`` (Definition 3) per device subject
to (10a) ``T_cmp + T_com <= T_max``, (10b) ``E_cmp + E_com <= E_max``, (10c) ``alpha_min <= alpha <= 1``,
(10d) ``0 < beta <= beta_max``, (10e) ``f_min <= f <= f_max``.

This module holds the frozen input/output dataclasses, input validation, the cost model, the
"cheapest setting" feasibility test and the solution builder shared by the closed form
(:mod:`optimizers.anycost`) and the geometric-program reference (:mod:`optimizers.anycost_gp`).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, fields, replace

import numpy as np

from optimizers import _checks as chk
from optimizers.errors import OptimizerInputError

__all__ = [
    "AnycostDevices",
    "AnycostSolution",
    "REASON_LATENCY",
    "REASON_ENERGY",
    "REASON_LATENCY_ENERGY",
    "REASON_CONFLICT",
]

#: Even at ``f_max`` the smallest model (``alpha_min``) cannot finish computing within ``T_max``
#: (``tau*D*alpha_min*W / f_max >= T_max``); the energy budget alone could be met.
REASON_LATENCY = "latency"
#: Even at ``f_min`` the smallest model costs at least ``E_max`` to compute
#: (``eps*f_min**2*tau*D*alpha_min*W >= E_max``; with a static power, at the least-energy frequency, see
#: :func:`infeasibility_reason`); the deadline alone could be met.
REASON_ENERGY = "energy"
#: Both of the above at once.
REASON_LATENCY_ENERGY = "latency+energy"
#: Each budget can be met alone by some ``f`` in ``[f_min, f_max]``, but no single frequency meets both:
#: the frequency fast enough for ``T_max`` burns more than ``E_max``
#: (``eps*(tau*D*alpha_min*W)**3 >= T_max**2 * E_max``; with a static power see :func:`infeasibility_reason`).
REASON_CONFLICT = "latency-energy conflict"

_REASON_DTYPE = "<U24"


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


def _check_array(name: str, raw: object, *, zero_ok: bool = False) -> np.ndarray:
    """Return ``raw`` as a read-only float64 array of shape (n,), finite and > 0 (>= 0 with ``zero_ok``), or raise.

    Not :func:`optimizers._checks.one_dimensional`: this copies ``raw`` (the caller's array stays writable),
    accepts an empty array, checks the shape before the values, and keeps its own messages for a value
    that is not numbers or not 1-D.
    """
    try:
        a = np.array(raw, dtype=np.float64)
    except (TypeError, ValueError):
        raise OptimizerInputError(f"{name}: must be an array of numbers, got {type(raw).__name__}") from None
    if a.ndim != 1:
        raise OptimizerInputError(f"{name}: must have shape (n_devices,), got shape {a.shape}")
    if zero_ok:
        chk.require(a, name, np.isfinite(a) & (a >= 0), "must be finite and >= 0")
    else:
        chk.require(a, name, np.isfinite(a) & (a > 0), "must be finite and > 0")
    return _readonly(a)


@dataclass(frozen=True)
class AnycostDevices:
    """Per-device inputs of AnycostFL's problem (P1), eq. (10); every field has shape (n_devices,).

    Attributes:
        samples: local data size ``|D_i|`` [samples], > 0.
        eps: hardware energy coefficient ``epsilon_i`` of eq. (7) [J/cycle/Hz^2], > 0.
        f_min_hz: lowest CPU frequency ``f_i^min`` [Hz], > 0.
        f_max_hz: highest CPU frequency ``f_i^max`` [Hz], >= ``f_min_hz``.
        e_max_j: per-round energy budget ``E_i^max`` [J], > 0.
        rate_bps: uplink rate ``r_i`` of eq. (8) [bit/s], > 0.
        p_tx_w: transmit power ``P_i^com`` [W], > 0; it only prices the upload time (eq. (9)), the rate is
            ``rate_bps``. Pass the device's effective upload draw (circuit + radiated power / PA efficiency).
        p_static_w: static (idle) platform power ``P_i^static`` [W] drawn during computation, >= 0 (optional;
            default zeros, the paper's eq. (7)). Compute power is ``P_static + eps*f**3``; devices with
            ``p_static_w > 0`` are solved numerically (:mod:`optimizers.anycost_static`).

    Arrays are copied to read-only float64 on construction; bad values raise
    :class:`~optimizers.errors.OptimizerInputError` naming the field, the index and the allowed range.
    """

    samples: np.ndarray
    eps: np.ndarray
    f_min_hz: np.ndarray
    f_max_hz: np.ndarray
    e_max_j: np.ndarray
    rate_bps: np.ndarray
    p_tx_w: np.ndarray
    p_static_w: np.ndarray | None = None

    def __post_init__(self) -> None:
        for name in _DEVICE_FIELDS:
            object.__setattr__(self, name, _check_array(name, getattr(self, name)))
        n = self.samples.shape[0]
        raw_static = np.zeros(n) if self.p_static_w is None else self.p_static_w
        object.__setattr__(self, "p_static_w", _check_array("p_static_w", raw_static, zero_ok=True))
        for name in (*_DEVICE_FIELDS, "p_static_w"):
            if getattr(self, name).shape[0] != n:
                raise OptimizerInputError(
                    f"{name}: has {getattr(self, name).shape[0]} devices, samples has {n}; all fields need the same length"
                )
        chk.require(
            self.f_min_hz, "f_min_hz", self.f_min_hz <= self.f_max_hz, "must be <=", other=("f_max_hz", self.f_max_hz)
        )

    def __len__(self) -> int:
        return int(self.samples.shape[0])


#: The required fields (all > 0); ``p_static_w`` (>= 0, optional) is checked on its own.
_DEVICE_FIELDS = tuple(fld.name for fld in fields(AnycostDevices) if fld.name != "p_static_w")


@dataclass(frozen=True)
class AnycostSolution:
    """Per-device optimum of AnycostFL's problem (P3); every field has shape (n_devices,).

    Infeasible devices (``feasible == False``) get 0 in every numeric field and a non-empty ``reason``
    (one of :data:`REASON_LATENCY`, :data:`REASON_ENERGY`, :data:`REASON_LATENCY_ENERGY`,
    :data:`REASON_CONFLICT`); feasible devices have ``reason == ""``. No field holds NaN.

    Attributes:
        alpha: model shrinking factor, in ``[alpha_min, 1]``.
        beta: gradient compression rate, in ``(0, beta_max]``.
        f_hz: CPU frequency [Hz], in ``[f_min_hz, f_max_hz]``.
        phi: latency split ``T_cmp / T_max`` of eq. (20) [-].
        varphi: energy split ``E_cmp / E_max`` of eq. (20) [-]. ``phi + T_com/T_max`` and
            ``varphi + E_com/E_max`` equal 1 where the constraint is tight (Lemma 3), and are below 1
            where ``alpha`` and ``beta`` both sit at their caps.
        gain: local learning gain ``alpha**4 * beta``, Definition 3 [-].
        feasible: whether the device can meet (10a)-(10e) at all.
        reason: why an infeasible device is infeasible, ``""`` when feasible.
        t_cmp_s, t_com_s: computation and upload time, eqs. (6), (9) [s].
        e_cmp_j, e_com_j: computation and upload energy, eqs. (7), (9) [J].
        weights: optimal aggregation weights ``p_i`` of eq. (13) over the feasible devices (0 for the
            others); they sum to 1 when at least one device is feasible.
    """

    alpha: np.ndarray
    beta: np.ndarray
    f_hz: np.ndarray
    phi: np.ndarray
    varphi: np.ndarray
    gain: np.ndarray
    feasible: np.ndarray
    reason: np.ndarray
    t_cmp_s: np.ndarray
    t_com_s: np.ndarray
    e_cmp_j: np.ndarray
    e_com_j: np.ndarray
    weights: np.ndarray

    def __post_init__(self) -> None:
        for fld in fields(self):
            object.__setattr__(self, fld.name, _readonly(np.asarray(getattr(self, fld.name))))

    def __len__(self) -> int:
        return int(self.alpha.shape[0])


@dataclass(frozen=True)
class _Problem:
    """Validated per-device constants, shape (n,) unless noted.

    ``c`` = tau*D*W [cycles], ``s`` = S/r [s], ``t`` = T_max [s] (scalar), ``e`` = E_max [J], ``p`` = P [W],
    ``p0`` = P_static [W].
    """

    c: np.ndarray
    s: np.ndarray
    t: float
    e: np.ndarray
    p: np.ndarray
    eps: np.ndarray
    f_min: np.ndarray
    f_max: np.ndarray
    alpha_min: float
    beta_max: float
    p0: np.ndarray

    def subset(self, index: np.ndarray) -> _Problem:
        """The same problem for the devices ``index`` (an integer array)."""
        per_device = ("c", "s", "e", "p", "eps", "f_min", "f_max", "p0")
        return replace(self, **{name: getattr(self, name)[index] for name in per_device})


def _check_scalar(name: str, value: object, *, upper_one: bool = False) -> float:
    """Return ``value`` as a float in (0, inf) or, with ``upper_one``, in (0, 1]; else raise.

    Not :func:`optimizers._checks.positive` / :func:`~optimizers._checks.in_range`: this accepts exactly the
    :class:`numbers.Real` instances (no 0-d arrays, no ``Decimal``), says ``"must be a real number"`` for
    anything else, folds non-finite values into ``"must be finite and > 0"`` and checks the half-open
    interval (0, 1].
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise OptimizerInputError(f"{name}={value!r}: must be a real number")
    v = float(value)
    if upper_one:
        if not (0.0 < v <= 1.0):
            raise OptimizerInputError(f"{name}={v!r}: must be in (0, 1]")
    elif not (math.isfinite(v) and v > 0.0):
        raise OptimizerInputError(f"{name}={v!r}: must be finite and > 0")
    return v


def build_problem(
    devices: AnycostDevices,
    *,
    t_max_s: float,
    cycles_per_sample: float,
    update_bits: float,
    epochs: float,
    alpha_min: float,
    beta_max: float,
) -> _Problem:
    """Validate the scalar settings and fold them into per-device constants (internal)."""
    if not isinstance(devices, AnycostDevices):
        raise OptimizerInputError(f"devices: must be an AnycostDevices, got {type(devices).__name__}")
    t = _check_scalar("t_max_s", t_max_s)
    w = _check_scalar("cycles_per_sample", cycles_per_sample)
    bits = _check_scalar("update_bits", update_bits)
    tau = _check_scalar("epochs", epochs)
    a_min = _check_scalar("alpha_min", alpha_min, upper_one=True)
    b_max = _check_scalar("beta_max", beta_max, upper_one=True)
    return _Problem(
        c=tau * devices.samples * w,
        s=bits / devices.rate_bps,
        t=t,
        e=devices.e_max_j,
        p=devices.p_tx_w,
        eps=devices.eps,
        f_min=devices.f_min_hz,
        f_max=devices.f_max_hz,
        alpha_min=a_min,
        beta_max=b_max,
        p0=devices.p_static_w,
    )


def build_solution(
    pb: _Problem,
    *,
    alpha: np.ndarray,
    beta: np.ndarray,
    f_hz: np.ndarray,
    feasible: np.ndarray,
    reason: np.ndarray,
    t_cmp_s: np.ndarray,
    t_com_s: np.ndarray,
    e_cmp_j: np.ndarray,
) -> AnycostSolution:
    """The :class:`AnycostSolution` of a chosen (alpha, beta, f) per device and its costs (internal).

    Adds the splits ``phi = T_cmp / T_max`` and ``varphi = E_cmp / E_max`` of eq. (20), the gain
    ``alpha**4 * beta`` (Definition 3), the upload energy ``E_com = P * T_com`` [J] (eq. 9) and the eq. (13)
    weights over the feasible devices. Infeasible devices must already carry 0 in every numeric argument.
    """
    return AnycostSolution(
        alpha=alpha, beta=beta, f_hz=f_hz,
        phi=t_cmp_s / pb.t, varphi=e_cmp_j / pb.e,
        gain=alpha**4 * beta,
        feasible=feasible, reason=reason,
        t_cmp_s=t_cmp_s, t_com_s=t_com_s, e_cmp_j=e_cmp_j, e_com_j=pb.p * t_com_s,
        weights=aggregation_weights(np.where(feasible, alpha, 1.0), np.where(feasible, beta, 1.0), feasible),
    )  # fmt: skip


def infeasibility_reason(pb: _Problem) -> np.ndarray:
    """Why each device cannot meet (10a)-(10e) even at alpha_min and beta -> 0+; ``""`` if it can.

    At beta -> 0+ only computation costs remain, eqs. (6)-(7). A frequency f in [f_min, f_max] must satisfy
    ``c*alpha_min/f < T_max`` and ``eps*f**2*c*alpha_min < E_max``. Such an f exists iff
    (i) ``c*alpha_min/f_max < T_max``, (ii) ``eps*f_min**2*c*alpha_min < E_max`` and
    (iii) ``eps*(c*alpha_min)**3 < T_max**2 * E_max`` (the latency-tight frequency is within the energy budget).
    With a static power ``P_static > 0`` the energy per cycle ``g(f) = P_static/f + eps*f**2`` [J/cycle] is
    lowest at ``f* = (P_static/(2*eps))**(1/3)``, so (ii) and (iii) become ``g(f_e)*c*alpha_min < E_max`` with
    ``f_e = clip(f*, f_min, f_max)`` and ``g(f_j)*c*alpha_min < E_max`` with
    ``f_j = clip(f*, max(f_min, c*alpha_min/T_max), f_max)`` (g is convex; see :func:`static_frequencies`).
    Returns a str array, shape (n,).
    """
    ca = pb.c * pb.alpha_min
    lat_ok = ca / pb.f_max < pb.t
    en_ok = pb.eps * pb.f_min**2 * ca < pb.e
    joint_ok = pb.eps * ca**3 < pb.t**2 * pb.e
    static = pb.p0 > 0
    if static.any():
        f_e, f_j = static_frequencies(pb)
        en_ok = np.where(static, energy_per_cycle(pb, f_e) * ca < pb.e, en_ok)
        joint_ok = np.where(static, energy_per_cycle(pb, f_j) * ca < pb.e, joint_ok)
    reason = np.full(pb.c.shape, "", dtype=_REASON_DTYPE)
    reason[~joint_ok] = REASON_CONFLICT
    reason[~lat_ok] = REASON_LATENCY
    reason[~en_ok] = REASON_ENERGY
    reason[~lat_ok & ~en_ok] = REASON_LATENCY_ENERGY
    return reason


def tightest_reason(pb: _Problem) -> np.ndarray:
    """The cheapest-setting condition of :func:`infeasibility_reason` closest to failing, str array (n,).

    Used for devices within rounding error of the feasibility boundary, where a solver finds no strictly
    feasible point although the exact test passes.
    """
    ca = pb.c * pb.alpha_min
    en_ratio = pb.eps * pb.f_min**2 * ca / pb.e
    joint_ratio = pb.eps * ca**3 / (pb.t**2 * pb.e)
    static = pb.p0 > 0
    if static.any():
        f_e, f_j = static_frequencies(pb)
        en_ratio = np.where(static, energy_per_cycle(pb, f_e) * ca / pb.e, en_ratio)
        joint_ratio = np.where(static, energy_per_cycle(pb, f_j) * ca / pb.e, joint_ratio)
    ratios = np.stack([ca / (pb.f_max * pb.t), en_ratio, joint_ratio])
    names = np.array([REASON_LATENCY, REASON_ENERGY, REASON_CONFLICT], dtype=_REASON_DTYPE)
    return names[np.argmax(ratios, axis=0)]


def energy_per_cycle(pb: _Problem, f: np.ndarray) -> np.ndarray:
    """Computation energy per CPU cycle at frequency ``f`` [Hz]: ``g(f) = P_static/f + eps*f**2`` [J/cycle].

    ``E_cmp = g(f) * c * alpha``: eq. (7) plus the static power drawn for ``T_cmp = c*alpha/f`` (eq. (6)).
    """
    return pb.p0 / f + pb.eps * f**2


def static_frequencies(pb: _Problem) -> tuple[np.ndarray, np.ndarray]:
    """``(f_e, f_j)`` [Hz], shape (n,): the least-energy frequency in ``[f_min, f_max]`` and in the part of it
    that meets the deadline at alpha_min, ``[max(f_min, c*alpha_min/T_max), f_max]``.

    ``g(f)`` of :func:`energy_per_cycle` is convex with its minimum at ``f* = (P_static/(2*eps))**(1/3)``, so
    the least-energy frequency of an interval is ``f*`` clipped into it (the lower end when P_static = 0).
    """
    f_star = np.cbrt(pb.p0 / (2 * pb.eps))
    f_e = np.clip(f_star, pb.f_min, pb.f_max)
    f_j = np.clip(f_star, np.minimum(np.maximum(pb.f_min, pb.c * pb.alpha_min / pb.t), pb.f_max), pb.f_max)
    return f_e, f_j


def aggregation_weights(alpha: np.ndarray, beta: np.ndarray, include: np.ndarray | None = None) -> np.ndarray:
    """Optimal aggregation weights, AnycostFL eq. (13) (as derived in eqs. (16)-(17)).

    ``p_i = d_i**-2 / sum_k d_k**-2`` with ``d_i = 1 - alpha_i*(2 - alpha_i)*sqrt(beta_i)``, the sum over the
    included devices. The printed eq. (13) drops the per-device factor ``d_i**-2`` from the numerator;
    eqs. (16)-(17) give the form used here. If some included device has ``d_i == 0`` (alpha = beta = 1, an
    uncompressed full update) the weight is shared equally among those devices, the limit of the formula.

    Args:
        alpha: shrinking factors, shape (n,), in (0, 1].
        beta: compression rates, shape (n,), in (0, 1].
        include: boolean mask, shape (n,), of the devices whose updates are aggregated (default: all).
            Excluded devices get weight 0.

    Returns:
        Weights, shape (n,), summing to 1 (all zeros when no device is included).
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    beta = np.asarray(beta, dtype=np.float64)
    if alpha.shape != beta.shape or alpha.ndim != 1:
        raise OptimizerInputError(f"alpha, beta: must both have shape (n,), got {alpha.shape} and {beta.shape}")
    mask = np.ones(alpha.shape, dtype=bool) if include is None else np.asarray(include, dtype=bool)
    if mask.shape != alpha.shape:
        raise OptimizerInputError(f"include: must have shape {alpha.shape}, got {mask.shape}")
    for name, a in (("alpha", alpha), ("beta", beta)):
        chk.require(a, name, ~mask | ((a > 0) & (a <= 1)), "must be in (0, 1]")  # excluded devices: any value
    w = np.zeros(alpha.shape)
    if not mask.any():
        return w
    d = 1.0 - alpha * (2.0 - alpha) * np.sqrt(beta)
    d = np.where(mask, np.maximum(d, 0.0), np.inf)
    zero = d == 0.0
    if zero.any():
        w[zero] = 1.0 / zero.sum()
        return w
    ratio = d.min() / d  # in (0, 1]: no overflow for tiny d
    w = np.where(mask, ratio**2, 0.0)
    return w / w.sum()
