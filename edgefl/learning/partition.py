"""Splitting a training set over devices. Every function returns one index array per device, disjoint.

IID, label shards (k classes per device), Dirichlet(alpha) over classes, CC-FedAvg's gamma mix of IID and
label-sorted data, unbalanced power-law (lognormal) sizes, and data that already belongs to devices. All take an
explicit ``rng: numpy.random.Generator``; each returned array is sorted, and no sample is in two arrays. Bad
arguments raise ``ValueError`` naming the argument, its value and the allowed range (callers turn it into a
``ScenarioError``).
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np

__all__ = [
    "partition_iid",
    "partition_shards",
    "partition_by_owner",
    "partition_dirichlet",
    "partition_gamma_mix",
    "partition_power_law",
    "power_law_sizes",
    "LUO_SETUP3_MEAN_SIZE",
    "LUO_SETUP3_STD_SIZE",
]

LUO_SETUP3_MEAN_SIZE = 245.0
"""Luo et al. (INFOCOM 2021) Sec. VI-A setup 3: samples per device, mean (24,517 samples over N = 100 devices)."""
LUO_SETUP3_STD_SIZE = 362.0
"""Luo et al. setup 3: samples per device, standard deviation."""


def partition_iid(n_samples: int, n_devices: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Shuffle and deal the samples into ``n_devices`` parts whose sizes differ by at most one."""
    if n_devices > n_samples:
        raise ValueError(f"n_devices={n_devices}: must be <= the number of training samples ({n_samples})")
    return [np.sort(p) for p in np.array_split(rng.permutation(n_samples), n_devices)]


def partition_shards(
    labels: np.ndarray, n_devices: int, classes_per_device: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """Label shards: every device holds samples of exactly ``classes_per_device`` distinct classes.

    (McMahan et al.'s pathological non-IID split, as HeteroFL and Luo et al. use it, "k classes per device".)
    ``n_devices * k`` class slots are laid out as a random permutation of the classes repeated cyclically, so
    each class gets an equal number of slots (+-1) and device i's k consecutive slots are distinct classes;
    each class's samples are shuffled and dealt equally over its slots. Devices are then shuffled.
    """
    classes = np.unique(labels)
    k = classes_per_device
    if k > classes.size:
        raise ValueError(f"classes_per_device={k}: must be <= the number of classes ({classes.size})")
    slots = np.resize(rng.permutation(classes), n_devices * k)  # cyclic: any k consecutive are distinct
    parts: list[list[np.ndarray]] = [[] for _ in range(n_devices)]
    for c in classes:
        where = np.flatnonzero(slots == c)
        members = rng.permutation(np.flatnonzero(labels == c))
        if where.size > members.size:
            raise ValueError(
                f"classes_per_device={k} with n_devices={n_devices}: class {c} has {members.size} samples "
                f"for {where.size} devices; need at least one sample per device holding it"
            )
        for slot, chunk in zip(where, np.array_split(members, where.size)):
            parts[slot // k].append(chunk)
    order = rng.permutation(n_devices)
    return [np.sort(np.concatenate(parts[i])) for i in order]


def partition_by_owner(owner: np.ndarray, n_devices: int) -> list[np.ndarray]:
    """Data that already belongs to devices (Synthetic): device k gets the samples with ``owner == k``."""
    return [np.flatnonzero(owner == k) for k in range(n_devices)]


# ---------------------------------------------------------------------------------------------- validation
def _int_in(name: str, value: object, lo: int, hi: int) -> int:
    if not isinstance(value, Integral) or isinstance(value, bool) or not lo <= value <= hi:
        raise ValueError(f"{name}={value!r}: must be an integer in [{lo}, {hi}]")
    return int(value)


def _real_in(name: str, value: object, lo: float, hi: float, *, lo_open: bool = False) -> float:
    ok = isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(float(value))
    if not ok or float(value) < lo or (lo_open and float(value) == lo) or float(value) > hi:
        raise ValueError(f"{name}={value!r}: must be a finite number in {'(' if lo_open else '['}{lo}, {hi}]")
    return float(value)


def _labels(labels: object) -> np.ndarray:
    y = np.asarray(labels)
    if y.ndim != 1 or y.size == 0 or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"labels: must be a non-empty 1-D integer array, got dtype {y.dtype} shape {y.shape}")
    return y


def _split_extras_last(a: np.ndarray, parts: int) -> list[np.ndarray]:
    """``a`` cut into ``parts`` contiguous pieces whose sizes differ by at most one, the larger pieces last
    (:func:`numpy.array_split` puts them first)."""
    sizes = np.full(parts, a.size // parts, dtype=np.int64)
    sizes[parts - a.size % parts :] += 1
    return np.split(a, np.cumsum(sizes)[:-1])


# ---------------------------------------------------------------------------------------------- Dirichlet
def partition_dirichlet(
    labels: np.ndarray,
    n_devices: int,
    alpha: float,
    rng: np.random.Generator,
    *,
    min_size: int = 1,
    max_draws: int = 1000,
) -> list[np.ndarray]:
    """Dirichlet(alpha) label skew: each class is split over the devices in Dirichlet proportions.

    Hsu, Qi and Brown, "Measuring the Effects of Non-Identical Data Distribution for Federated Visual
    Classification" (2019), in the per-class form of Yurochkin et al. (ICML 2019) and Li et al.'s NIID-Bench
    (ICDE 2022): for every class c, q_c ~ Dir(alpha * 1_N) and class c's shuffled samples are cut at
    floor(cumsum(q_c) * n_c), device i taking the i-th piece. Small alpha -> each device holds few classes;
    alpha -> infinity -> IID. The whole draw is repeated (at most ``max_draws`` times) until every device holds at
    least ``min_size`` samples, as those reference implementations do; if none does, ``ValueError``. (NIID-Bench's
    extra "balance" step, which zeroes a class's share for devices already above n / N, is not applied: sizes
    follow the Dirichlet draw.)
    """
    y = _labels(labels)
    n_devices = _int_in("n_devices", n_devices, 1, y.size)
    alpha = _real_in("alpha", alpha, 0.0, 1e12, lo_open=True)
    min_size = _int_in("min_size", min_size, 0, y.size // n_devices)
    max_draws = _int_in("max_draws", max_draws, 1, 10**9)
    members = [rng.permutation(np.flatnonzero(y == c)) for c in np.unique(y)]
    sizes = np.array([m.size for m in members])
    for _ in range(max_draws):
        q = rng.dirichlet(np.full(n_devices, alpha), size=len(members))  # shape (n_classes, n_devices)
        cuts = np.minimum(np.floor(np.cumsum(q, axis=1)[:, :-1] * sizes[:, None]).astype(np.int64), sizes[:, None])
        bounds = np.concatenate([np.zeros((len(members), 1), np.int64), cuts, sizes[:, None]], axis=1)
        counts = np.diff(bounds, axis=1)  # shape (n_classes, n_devices)
        if counts.sum(axis=0).min() >= min_size:
            break
    else:
        raise ValueError(
            f"alpha={alpha} with n_devices={n_devices}: none of {max_draws} Dirichlet draws gave every device at "
            f"least min_size={min_size} samples; raise alpha or lower n_devices or min_size"
        )
    return [np.sort(np.concatenate([m[b[i] : b[i + 1]] for m, b in zip(members, bounds)])) for i in range(n_devices)]


# ---------------------------------------------------------------------------------------------- CC-FedAvg gamma mix
def partition_gamma_mix(
    labels: np.ndarray,
    n_devices: int,
    gamma: float,
    rng: np.random.Generator,
    *,
    classes_per_device: int | None = None,
    shuffle_devices: bool = True,
) -> list[np.ndarray]:
    """CC-FedAvg's data heterogeneity: a fraction ``gamma`` of every device's data is IID, the rest label-sorted.

    Zhang et al., "CC-FedAvg", Sec. VI-A: "We construct data heterogeneity following [39], using gamma to control
    the degree of data heterogeneity ... gamma = 0 means the data cross clients is totally non-IID ..., and
    gamma = 1 means the data is IID"; [39] is FedCos, and Table I's "90% non-IID" is gamma = 0.1. (The paper's
    gloss "the proportion of non-IID data" contradicts its own endpoints; gamma is the IID share, as in the
    authors' code, where it is the ``iidpart`` argument of ``cifar_noniid``.) Construction, as that code does it:

    1. from every class take round(gamma * n_c) random samples into an IID pool (so the pool keeps the class
       proportions), shuffle it and deal it equally over the devices;
    2. keep the rest sorted by label and cut it into ``n_devices`` contiguous equal chunks, one per device, so a
       device's non-IID part spans about n_classes / n_devices classes (one or two when n_devices >= n_classes).

    Every sample is used (the authors' code drops the remainders of its integer divisions) and part sizes differ
    by at most one, so each device's IID share is gamma up to rounding. With ``classes_per_device=k``, step 2
    deals the rest as label shards instead (:func:`partition_shards`: exactly k classes per device; sizes then
    follow the shards), the "two classes of training data" per client of the paper's cross-device Table II.
    ``shuffle_devices`` (default) puts the devices in random order; the authors' code gives chunk i to client i,
    which ties a client's classes to its index and so to its resource level p_i = (1/2)^floor(beta i / N).
    """
    y = _labels(labels)
    n_devices = _int_in("n_devices", n_devices, 1, y.size)
    gamma = _real_in("gamma", gamma, 0.0, 1.0)
    if classes_per_device is not None:
        _int_in("classes_per_device", classes_per_device, 1, np.unique(y).size)
    iid_pool, rest = [], []
    for c in np.unique(y):
        m = rng.permutation(np.flatnonzero(y == c))
        k = int(round(gamma * m.size))
        iid_pool.append(m[:k])
        rest.append(m[k:])  # classes in ascending label order: the label-sorted remainder
    iid = rng.permutation(np.concatenate(iid_pool))
    sorted_rest = np.concatenate(rest)
    if classes_per_device is not None and sorted_rest.size:
        non_iid = [sorted_rest[p] for p in partition_shards(y[sorted_rest], n_devices, classes_per_device, rng)]
    else:
        non_iid = np.array_split(sorted_rest, n_devices)
    # IID extras go to the last devices, non-IID extras to the first: totals differ by at most one
    iid_parts = _split_extras_last(iid, n_devices)
    parts = [np.sort(np.concatenate([a, b])) for a, b in zip(non_iid, iid_parts)]
    if shuffle_devices:
        parts = [parts[i] for i in rng.permutation(n_devices)]
    return parts


# ---------------------------------------------------------------------------------------------- power-law sizes
def power_law_sizes(
    total: int,
    n_devices: int,
    rng: np.random.Generator,
    *,
    std_size: float | None = None,
    min_size: int = 1,
) -> np.ndarray:
    """Unbalanced device data sizes [samples]: mean exactly total / n_devices, standard deviation ``std_size``.

    Luo et al., "Cost-Effective Federated Learning Design" (INFOCOM 2021), Sec. VI-A setup 3, distributes
    24,517 samples "among N = 100 devices in an unbalanced power law distribution, where the number of samples in
    each device has a mean of 245 and standard deviation of 362"; the law is not given further. As in FedProx's
    Synthetic generator that Luo et al. follow (Li et al. 2020: sizes ~ lognormal(4, 2) + 50), the heavy tail is
    lognormal: size_i = min_size + share_i with share_i proportional to exp(s * z_i), z_i ~ N(0, 1). Instead of
    fixing s in advance (the sample standard deviation of N = 100 lognormal draws falls ~10 % short of the law's
    on average), s is solved by bisection so that *this draw's* shares have coefficient of variation
    std_size / (mean - min_size) (population form, ddof = 0); the shares are scaled to sum to
    total - N * min_size and rounded by largest remainder. So the sizes sum to ``total`` exactly and their standard
    deviation is ``std_size`` up to rounding (< 1 sample). ``std_size`` defaults to Luo's ratio,
    mean * 362 / 245, and must be below (mean - min_size) * sqrt(N - 1), the limit where one device holds every
    free sample. Returns int64, shape (n_devices,).
    """
    n_devices = _int_in("n_devices", n_devices, 1, 10**9)
    total = _int_in("total", total, 0, 10**15)
    min_size = _int_in("min_size", min_size, 0, total // n_devices)
    mean = total / n_devices
    free = total - n_devices * min_size
    sizes = np.full(n_devices, min_size, dtype=np.int64)
    if n_devices == 1 or free == 0:
        sizes[0] += free
        return sizes
    given = std_size is not None
    std = mean * LUO_SETUP3_STD_SIZE / LUO_SETUP3_MEAN_SIZE if std_size is None else std_size
    limit = free / n_devices * math.sqrt(n_devices - 1)
    if not isinstance(std, Real) or isinstance(std, bool) or not 0 <= std < limit:
        raise ValueError(
            f"std_size={std!r}{'' if given else ' (the default, mean * 362 / 245)'}: must be a number in "
            f"[0, {limit:.6g}) for {n_devices} devices of mean size {mean:.6g} with min_size={min_size}"
        )
    z = rng.standard_normal(n_devices)
    z -= z.max()  # exp(s * z) in (0, 1]: no overflow for any s; the coefficient of variation is scale-free
    target_cv = float(std) / (free / n_devices)

    def cv(s: float) -> float:
        w = np.exp(s * z)
        return float(w.std() / w.mean())

    lo, hi = 0.0, 1.0
    while cv(hi) < target_cv:  # cv(s) rises from 0 to sqrt(N - 1) (the sample moments are log-convex in s)
        lo, hi = hi, 2.0 * hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if cv(mid) < target_cv else (lo, mid)
        if hi - lo <= 1e-12 * hi:
            break
    w = np.exp(0.5 * (lo + hi) * z)
    share = w * (free / w.sum())
    floor = np.floor(share).astype(np.int64)
    short = free - int(floor.sum())
    floor[np.argsort(floor - share, kind="stable")[:short]] += 1  # largest remainders first
    return sizes + floor


def partition_power_law(
    n_samples: int,
    n_devices: int,
    rng: np.random.Generator,
    *,
    mean_size: float | None = None,
    std_size: float | None = None,
    min_size: int = 1,
) -> list[np.ndarray]:
    """Unbalanced IID split (Luo et al. setup 3): device sizes from :func:`power_law_sizes`, samples random.

    ``mean_size`` [samples per device] defaults to n_samples / n_devices (every sample used); a smaller value uses
    a random subset of round(mean_size * n_devices) samples, e.g. ``mean_size=LUO_SETUP3_MEAN_SIZE`` (245) with
    100 devices uses 24,500 of them. ``std_size`` defaults to mean_size * 362 / 245 (Luo's ratio).
    """
    n_samples = _int_in("n_samples", n_samples, 1, 10**15)
    n_devices = _int_in("n_devices", n_devices, 1, n_samples)
    if mean_size is None:
        total = n_samples
    else:
        mean_size = _real_in("mean_size", mean_size, 0.0, n_samples / n_devices, lo_open=True)
        total = int(round(mean_size * n_devices))
    if not isinstance(min_size, Integral) or not 0 <= min_size <= total // n_devices:
        raise ValueError(
            f"min_size={min_size!r}: must be an integer in [0, {total // n_devices}] "
            f"(the mean size with {total} samples over {n_devices} devices)"
        )
    sizes = power_law_sizes(total, n_devices, rng, std_size=std_size, min_size=min_size)
    chosen = rng.permutation(n_samples)[:total]
    return [np.sort(p) for p in np.split(chosen, np.cumsum(sizes)[:-1])]
