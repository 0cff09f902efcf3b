"""Quantisers of the kept values of a sparse update (AnycostFL Sec. III-C 2), eqs. (3)-(4); STC's ternary values).

Values are numpy arrays; magnitudes and signs are handled separately so the lossless coders see small integers.
"""

from __future__ import annotations

import numpy as np

from edgefl.compression.jit import kernel
from edgefl.errors import EdgeflError

__all__ = ["QuantizationError", "quantization_points", "stochastic_levels", "level_magnitudes", "expected_error",
           "ternary", "rounded_levels", "rounded_magnitudes", "rounded_groups", "widened_difference"]  # fmt: skip


class QuantizationError(EdgeflError, ValueError):
    """A quantiser argument is out of range (levels < 1, u_min > u_max, uniforms of the wrong size)."""


def _check(levels: int, u_min: float, u_max: float) -> None:
    if int(levels) < 1:
        raise QuantizationError(f"levels={levels!r}: must be an integer >= 1")
    if not 0.0 <= u_min <= u_max:
        raise QuantizationError(f"u_min={u_min!r}, u_max={u_max!r}: need 0 <= u_min <= u_max")


def quantization_points(levels: int, u_min: float, u_max: float) -> np.ndarray:
    """The ``levels + 1`` points ``Q_l = l (u_max - u_min) / L + u_min``, l = 0..L, AnycostFL eq. (3).

    The paper writes l = 1..L; l = 0 (``Q_0 = u_min``) is included here so that every kept magnitude in
    ``[u_min, u_max]`` lies in an interval ``[Q_l, Q_{l+1}]``. ``L = levels`` is the number of intervals.
    Computed in float64 from the float32 ``u_min``/``u_max`` and rounded to float32, identically at encoder and
    decoder. Returns float32, shape ``(levels + 1,)``.
    """
    _check(levels, u_min, u_max)
    lo, hi = float(np.float32(u_min)), float(np.float32(u_max))
    return (lo + np.arange(levels + 1, dtype=np.float64) * ((hi - lo) / levels)).astype(np.float32)


def _interval(magnitudes: np.ndarray, points: np.ndarray, levels: int) -> np.ndarray:
    """Index l in 0..L-1 of the interval [Q_l, Q_{l+1}] holding each magnitude (arithmetic, then one correction
    against the rounded points)."""
    step = (points[-1] - points[0]) / levels
    lower = np.clip(np.floor((magnitudes - points[0]) / step), 0, levels - 1).astype(np.int64)
    lower -= (lower > 0) & (magnitudes < points[lower])
    lower += (lower < levels - 1) & (magnitudes >= points[np.minimum(lower + 1, levels)])
    return lower


def _checked(
    magnitudes: np.ndarray, levels: int, u_min: float, u_max: float, uniforms: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The magnitudes as float64 and the quantisation points Q_0..Q_L (float64) of eq. (3), once the arguments are
    checked (``uniforms`` of the magnitudes' shape)."""
    _check(levels, u_min, u_max)
    magnitudes = np.asarray(magnitudes, dtype=np.float64)
    if np.shape(uniforms) != magnitudes.shape:
        raise QuantizationError(f"uniforms of shape {np.shape(uniforms)} for magnitudes of shape {magnitudes.shape}")
    return magnitudes, quantization_points(levels, u_min, u_max).astype(np.float64)


def stochastic_levels(
    magnitudes: np.ndarray, levels: int, u_min: float, u_max: float, uniforms: np.ndarray
) -> np.ndarray:
    """Level index l in 0..L of each magnitude by probabilistic rounding, AnycostFL eq. (4) (unbiased).

    ``|u|`` in ``[Q_l, Q_{l+1}]`` goes to ``l`` with probability ``(Q_{l+1} - |u|)/(Q_{l+1} - Q_l)``, else to
    ``l + 1``, using ``uniforms`` (U[0, 1) draws, same shape as ``magnitudes``) so the caller owns the randomness.
    When ``u_max == u_min`` every index is 0.
    """
    magnitudes, points = _checked(magnitudes, levels, u_min, u_max, uniforms)
    if points[-1] <= points[0]:
        return np.zeros(magnitudes.shape, dtype=np.int64)
    lower = _interval(magnitudes, points, levels)
    q_lo, q_hi = points[lower], points[lower + 1]
    frac = np.clip((magnitudes - q_lo) / (q_hi - q_lo), 0.0, 1.0)  # P(round up)
    return lower + (np.asarray(uniforms) < frac)


def level_magnitudes(indices: np.ndarray, levels: int, u_min: float, u_max: float) -> np.ndarray:
    """The float32 magnitude ``Q_l`` of each level index (decoder side of eq. (3))."""
    return quantization_points(levels, u_min, u_max)[np.asarray(indices, dtype=np.int64)]


def expected_error(magnitudes: np.ndarray, levels: int, u_min: float, u_max: float) -> float:
    """Expected squared error of :func:`stochastic_levels`: ``sum (Q_{l+1} - |u|)(|u| - Q_l)`` (the variance of
    eq. (4)'s rounding, which is unbiased)."""
    magnitudes = np.asarray(magnitudes, dtype=np.float64)
    points = quantization_points(levels, u_min, u_max).astype(np.float64)
    if points[-1] <= points[0] or magnitudes.size == 0:
        return float(((magnitudes - points[0]) ** 2).sum()) if magnitudes.size else 0.0
    lower = _interval(magnitudes, points, levels)
    return float(np.clip((points[lower + 1] - magnitudes) * (magnitudes - points[lower]), 0.0, None).sum())


def ternary(values: np.ndarray) -> tuple[np.ndarray, float]:
    """STC's ternarisation of the kept values: signs (True = negative) and one magnitude ``mu = mean |v|``.

    (Sattler et al., "Sparse Ternary Compression", 2019, eq. (7)); the decoded value is ``(-1)**sign * mu``.
    """
    values = np.asarray(values, dtype=np.float32)
    mu = float(np.abs(values).mean()) if values.size else 0.0
    return values < 0, float(np.float32(mu))


def rounded_levels(
    magnitudes: np.ndarray, levels: int, u_min: float, u_max: float, uniforms: np.ndarray, *, with_error: bool = False
) -> tuple[np.ndarray, float | None]:
    """``(stochastic_levels(...), expected_error(...) if with_error else None)`` of the same arguments, equal to
    what those give, in fewer passes over the magnitudes: AnycostFL eqs. (3)-(4).

    For ``uniforms`` in [0, 1) (the callers' ``Generator.random`` draws): each magnitude's interval is found once
    for both, and the rounding probability is not clipped to [0, 1] (a uniform in [0, 1) is below ``p`` exactly
    when it is below ``clip(p, 0, 1)``, NaN included). Without the error, a 1-D array is quantised in one compiled
    loop (:func:`_rounded_plain`, or :func:`_rounded_kernel` where points collide), the same float operations per
    magnitude; a NaN magnitude goes to the numpy passes.
    """
    magnitudes, points = _checked(magnitudes, levels, u_min, u_max, uniforms)
    if points[-1] <= points[0]:
        error = float(((magnitudes - points[0]) ** 2).sum()) if with_error and magnitudes.size else 0.0
        return np.zeros(magnitudes.shape, dtype=np.int64), error if with_error else None
    if not with_error and magnitudes.ndim == 1:
        out = np.empty(magnitudes.size, dtype=np.int64)
        if _rounded_loop(magnitudes, np.asarray(uniforms, dtype=np.float64), points, int(levels), False, out):
            return out, None
    lower = _interval_searched(magnitudes, points, int(levels))
    if lower is None:
        lower = _interval_once(magnitudes, points, int(levels))
    above = magnitudes - points[lower]
    error = None
    if with_error:
        error = float(np.clip((points[lower + 1] - magnitudes) * above, 0.0, None).sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        above /= np.diff(points)[lower]
    lower += np.asarray(uniforms) < above
    return lower, error


def rounded_magnitudes(values: np.ndarray, levels: int, u_min: float, u_max: float,
                       uniforms: np.ndarray) -> np.ndarray:  # fmt: skip
    """``rounded_levels(|values|, ...)[0]`` of float32 ``values`` and float64 ``uniforms`` (1-D, same size), each
    magnitude widened to float64 as the loop reads it (no array of magnitudes)."""
    _check(levels, u_min, u_max)
    points = quantization_points(levels, u_min, u_max).astype(np.float64)
    values = np.asarray(values, dtype=np.float32)
    if points[-1] > points[0] and values.ndim == 1 and np.shape(uniforms) == values.shape:
        out = np.empty(values.size, dtype=np.int64)
        if _rounded_loop(values, np.asarray(uniforms, dtype=np.float64), points, int(levels), True, out):
            return out
    return rounded_levels(np.abs(values).astype(np.float64), levels, u_min, u_max, uniforms)[0]


def _rounded_loop(values: np.ndarray, uniforms: np.ndarray, points: np.ndarray, levels: int, magnitude: bool,
                  out: np.ndarray) -> bool:
    """:func:`_rounded_kernel`, or :func:`_rounded_plain` where no interval has zero width (the common case: a
    loop without branches)."""
    searched = _searched(points, levels)
    widths = np.diff(points)
    if widths.size and widths.min() > 0.0 and not _has_nan(values):
        (_rounded_plain_abs if magnitude else _rounded_plain)(values, uniforms, points, widths, levels, searched, out)
        return True
    return _rounded_kernel(values, uniforms, points, levels, searched, magnitude, out)


@kernel
def _has_nan(values: np.ndarray) -> bool:
    nan = 0
    for i in range(values.size):
        nan += values[i] != values[i]
    return nan > 0


@kernel
def _rounded_plain(values: np.ndarray, uniforms: np.ndarray, points: np.ndarray, widths: np.ndarray, levels: int,
                   searched: bool, out: np.ndarray) -> None:
    """:func:`_rounded_kernel` of float64 magnitudes where every width ``widths[l] = Q_{l+1} - Q_l`` is above 0
    and no magnitude is NaN, written without branches."""
    step = (points[levels] - points[0]) / levels
    top = float(levels - 1)
    for i in range(values.size):
        m = values[i]
        if searched:
            lower = 0
            for t in range(1, levels):
                lower += points[t] <= m
        else:
            x = (m - points[0]) / step
            x = min(max(x, 0.0), top)
            lower = int(x)
            lower -= (lower > 0) & (m < points[lower])
            lower += (lower < levels - 1) & (m >= points[lower + 1])
        out[i] = lower + (uniforms[i] < (m - points[lower]) / widths[lower])


@kernel
def _rounded_plain_abs(values: np.ndarray, uniforms: np.ndarray, points: np.ndarray, widths: np.ndarray,
                       levels: int, searched: bool, out: np.ndarray) -> None:
    """:func:`_rounded_plain` of the magnitudes of float32 values (a separate loop: a choice between the two
    inside it keeps the compiler from vectorising it)."""
    step = (points[levels] - points[0]) / levels
    top = float(levels - 1)
    for i in range(values.size):
        m = abs(np.float64(values[i]))
        if searched:
            lower = 0
            for t in range(1, levels):
                lower += points[t] <= m
        else:
            x = (m - points[0]) / step
            x = min(max(x, 0.0), top)
            lower = int(x)
            lower -= (lower > 0) & (m < points[lower])
            lower += (lower < levels - 1) & (m >= points[lower + 1])
        out[i] = lower + (uniforms[i] < (m - points[lower]) / widths[lower])


def rounded_groups(values: np.ndarray, levels: int, u_min: float, u_max: float, uniforms: np.ndarray,
                   j: int) -> tuple[np.ndarray, np.ndarray] | None:  # fmt: skip
    """The level indices of ``rounded_magnitudes(values, ...)`` j at a time as symbols ``sum_t d_t (L+1)^t`` (the
    last one zero padded) and their histogram over the alphabet (L+1)^j, in one compiled loop without the array of
    indices; the symbols as the smallest unsigned type that holds the alphabet. None where that loop does not
    apply (Q_L <= Q_0, colliding points, a NaN magnitude): then the caller quantises first."""
    _check(levels, u_min, u_max)
    points = quantization_points(levels, u_min, u_max).astype(np.float64)
    widths = np.diff(points)
    values = np.asarray(values)
    if not (values.dtype == np.float32 and values.ndim == 1 and np.shape(uniforms) == values.shape):
        return None
    if not (points[-1] > points[0] and widths.min() > 0.0) or _has_nan(values):
        return None
    base = int(levels) + 1
    alphabet = base**j
    kind = np.uint8 if alphabet <= 1 << 8 else (np.uint16 if alphabet <= 1 << 16 else np.int64)
    symbols = np.empty(-(-values.size // j), dtype=kind)
    counts = np.zeros(alphabet, dtype=np.int64)
    _rounded_groups_abs(values, np.asarray(uniforms, dtype=np.float64), points, widths, int(levels),
                        _searched(points, int(levels)), j, symbols, counts)  # fmt: skip
    return symbols, counts


@kernel
def _rounded_groups_abs(values: np.ndarray, uniforms: np.ndarray, points: np.ndarray, widths: np.ndarray,
                        levels: int, searched: bool, j: int, symbols: np.ndarray, counts: np.ndarray) -> None:
    """:func:`_rounded_plain_abs`' level of each value, j at a time as a symbol (digit t weighs (L+1)^t), and the
    symbols' histogram."""
    step = (points[levels] - points[0]) / levels
    top = float(levels - 1)
    base = levels + 1
    n = values.size
    for s in range(symbols.size):
        symbol = 0
        weight = 1
        for t in range(j):
            i = s * j + t
            if i < n:
                m = abs(np.float64(values[i]))
                if searched:
                    lower = 0
                    for q in range(1, levels):
                        lower += points[q] <= m
                else:
                    x = (m - points[0]) / step
                    x = min(max(x, 0.0), top)
                    lower = int(x)
                    lower -= (lower > 0) & (m < points[lower])
                    lower += (lower < levels - 1) & (m >= points[lower + 1])
                level = lower + (uniforms[i] < (m - points[lower]) / widths[lower])
                symbol += level * weight
            weight *= base
        symbols[s] = symbol
        counts[symbol] += 1


def _searched(points: np.ndarray, levels: int) -> bool:
    """Whether :func:`rounded_levels` finds the intervals by search among the inner points (:func:`_interval_searched`
    short of its NaN check) rather than by :func:`_interval_once`."""
    if levels > _SEARCHED_LEVELS or levels == 1:
        return False
    return bool((points[-1] - points[0]) / levels >= 4 * float(np.spacing(np.float32(points[-1]))))


@kernel
def _rounded_kernel(values: np.ndarray, uniforms: np.ndarray, points: np.ndarray, levels: int, searched: bool,
                    magnitude: bool, out: np.ndarray) -> bool:
    """:func:`rounded_levels`' level indices (no error) into ``out`` in one loop, for Q_L > Q_0: each
    magnitude's interval as :func:`_interval_searched` (the count of inner points Q_1..Q_{L-1} at or below it)
    or :func:`_interval_once` (the clipped arithmetic estimate and its two corrections) finds it, then the same
    rounding ``u < (|u| - Q_l) / (Q_{l+1} - Q_l)`` (a zero width: the sign of the numerator as an IEEE division
    gives it). ``magnitude``: ``values`` are float32 values whose magnitudes are quantised. Returns False (``out``
    not complete) at a NaN magnitude, where the numpy code decides."""
    step = (points[levels] - points[0]) / levels
    top = float(levels - 1)
    for i in range(values.size):
        m = np.float64(values[i])
        if magnitude:
            m = abs(m)
        if m != m:
            return False
        if searched:
            lower = 0
            for t in range(1, levels):
                if points[t] <= m:
                    lower += 1
        else:
            x = (m - points[0]) / step
            x = 0.0 if x < 0.0 else (top if x > top else x)
            lower = int(x)
            if lower > 0 and m < points[lower]:
                lower -= 1
            if lower < levels - 1 and m >= points[lower + 1]:
                lower += 1
        d = m - points[lower]
        w = points[lower + 1] - points[lower]
        if w != 0.0:
            above = d / w
        elif d > 0.0:
            above = np.inf
        elif d < 0.0:
            above = -np.inf
        else:
            above = np.nan
        out[i] = lower + 1 if uniforms[i] < above else lower
    return True


#: Largest L whose intervals :func:`_interval_searched` finds by binary search (log2(L) comparisons per magnitude,
#: fewer passes than the arithmetic's estimate and corrections up to about 16 intervals).
_SEARCHED_LEVELS = 15


def _interval_searched(magnitudes: np.ndarray, points: np.ndarray, levels: int) -> np.ndarray | None:
    """:func:`_interval_once` by ``np.searchsorted`` among the inner points Q_1..Q_{L-1}, for L of at most
    :data:`_SEARCHED_LEVELS` intervals whose points are at least 4 float32 spacings apart (None otherwise, or for
    a NaN magnitude). There the arithmetic estimate ``floor((|u| - Q_0) / step)`` is within one interval of the
    one holding ``|u|`` (each point is within half a float32 spacing of ``Q_0 + l step``), so its two corrections
    land on it, and the clip to [0, L - 1] is where the search puts magnitudes below Q_1 or at or above Q_{L-1}."""
    if levels > _SEARCHED_LEVELS or levels == 1:
        return None
    if not (points[-1] - points[0]) / levels >= 4 * float(np.spacing(np.float32(points[-1]))):
        return None
    if magnitudes.size and np.isnan(magnitudes.max()):
        return None
    return np.searchsorted(points[1:levels], magnitudes, side="right")


def _interval_once(magnitudes: np.ndarray, points: np.ndarray, levels: int) -> np.ndarray:
    """:func:`_interval` with the clip applied before the conversion to int (the same for every float: the
    truncation of a value in [0, L - 1] is its floor), and its two guards folded into the points compared with:
    NaN in place of ``Q_0`` and ``Q_L`` makes both comparisons false where the guards would; with one interval
    every magnitude is in it."""
    if levels == 1:
        return np.zeros(magnitudes.shape, dtype=np.int64)
    x = magnitudes - points[0]
    x /= (points[-1] - points[0]) / levels
    np.clip(x, 0, levels - 1, out=x)
    lower = x.astype(np.int64)
    inner = points.copy()
    inner[0] = inner[-1] = np.nan
    lower -= magnitudes < inner[lower]  # never below Q_0: lower > 0
    lower += magnitudes >= inner[lower + 1]  # never at or above Q_L: lower < L - 1
    return lower


def widened_difference(quantized: np.ndarray, original: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(u, q - u)`` for ``u``, ``q`` the float32 vectors ``original``, ``quantized`` (same size) widened to
    float64, in one compiled loop (the same float64 values as numpy's ``astype`` and subtraction)."""
    u = np.empty(original.size, dtype=np.float64)
    d = np.empty(original.size, dtype=np.float64)
    _widened_difference(quantized.reshape(-1), original.reshape(-1), u, d)
    return u, d


@kernel
def _widened_difference(quantized: np.ndarray, original: np.ndarray, u: np.ndarray, d: np.ndarray) -> None:
    for i in range(u.size):
        x = np.float64(original[i])
        u[i] = x
        d[i] = np.float64(quantized[i]) - x
