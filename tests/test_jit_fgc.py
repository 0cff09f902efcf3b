"""AnycostFL's compiled search kernels (AnycostFL Sec. III-C, eqs. (2)-(4)) against the numpy expressions they
replace: the one-element kernels' keys, the merged ranking and its running sums of squares, the kept kernels and
elements of the top k, and the level indices of :func:`quantize.rounded_levels`, bit for bit. Inputs include
zeros, -0.0, ties between one-element and multi-element kernels, subnormals, collapsed and a few float32 spacings
wide ranges, uniforms at 0, and updates with NaN or infinity (which fall back to arrays)."""

from __future__ import annotations

import math

import numpy as np

from edgefl.compression import MAX_LEVELS, codec, quantize, sparsify


def _plain_ranking(flat: np.ndarray, layout: sparsify.KernelLayout, score: str) -> tuple[np.ndarray, np.ndarray]:
    """(order, energy): the stable argsort of the kernels' scores and the cumulative sums of squares in its
    order, as the numpy formulation computes them."""
    mags = np.abs(flat.astype(np.float64))
    sums = np.add.reduceat(mags**2, layout.start) if layout.n_kernels else np.zeros(0)
    scores = np.sqrt(sums / layout.size) if score == "rms" else np.sqrt(sums)
    scores[layout.size == 1] = mags[layout.start[layout.size == 1]]
    order = np.argsort(-scores, kind="stable")
    return order, np.concatenate([[0.0], np.cumsum(sums[order])])


def _random_case(rng: np.random.Generator, trial: int) -> tuple[np.ndarray, sparsify.KernelLayout]:
    shapes = [tuple(int(d) for d in rng.integers(1, 6, int(rng.integers(0, 5)))) for _ in range(rng.integers(1, 6))]
    n = sum(math.prod(s) for s in shapes)
    flat = (rng.normal(size=n) * rng.random(n) * rng.choice([1e-3, 1.0, 1e3], size=n)).astype(np.float32)
    flat[rng.random(n) < 0.2] = 0.0
    flat[rng.random(n) < 0.05] = -0.0
    flat[rng.random(n) < 0.2] = flat[0]
    if trial % 9 == 0:
        flat[rng.random(n) < 0.1] = np.float32(1e-44)  # subnormal
    if trial % 13 == 0:
        flat[:] = 0.0
    return flat, sparsify.kernel_layout(shapes, kernel_wise=bool(trial % 4))


def test_single_keys_put_non_zero_magnitudes_first_and_zeros_last_in_index_order() -> None:
    rng = np.random.default_rng(1)
    for trial in range(60):
        n = int(rng.integers(0, 300))
        flat = rng.normal(size=n).astype(np.float32)
        flat[rng.random(n) < 0.3] = 0.0
        flat[rng.random(n) < 0.1] = -0.0
        segments = np.array([[0, 7, n]], dtype=np.int64)  # kernels 7.. (another tensor before them)
        keys = np.empty(n, dtype=np.uint64)
        nonzero, finite = codec._single_keys(flat.view(np.uint32), segments, 12, keys)
        mags = (flat.view(np.uint32) & np.uint32(0x7FFFFFFF)).astype(np.uint64)
        want = ((np.uint64(0x7FFFFFFF) - mags) << np.uint64(12)) | (np.arange(n, dtype=np.uint64) + np.uint64(7))
        is_zero = mags == 0
        assert finite and nonzero == int((~is_zero).sum())
        assert np.array_equal(keys[:nonzero], want[~is_zero]) and np.array_equal(keys[nonzero:], want[is_zero])
    for bad in (np.inf, -np.inf, np.nan):
        flat = np.array([1.0, bad, 0.0], dtype=np.float32)
        assert not codec._single_keys(flat.view(np.uint32), np.array([[0, 0, 3]]), 2, np.empty(3, np.uint64))[1]


def test_ranked_order_energy_and_kept_sets_equal_the_numpy_formulation() -> None:
    """Random layouts of every tensor rank, both scores, kernels of one and many elements; every k's kept
    kernels and elements; the running sums of squares equal to the bit."""
    rng = np.random.default_rng(2)
    for trial in range(150):
        flat, layout = _random_case(rng, trial)
        score = ["rms", "l2"][trial % 3 == 0]
        ranked = codec._Ranked(flat, layout, score)
        order, energy = _plain_ranking(flat, layout, score)
        assert ranked._arrays is None
        assert np.array_equal(ranked.order, order), trial
        got = np.array([ranked.energy(k) for k in range(layout.n_kernels + 1)])
        assert np.array_equal(got.view(np.uint64), energy.view(np.uint64)), trial
        assert ranked.total_energy == energy[-1]
        rank_el = sparsify.kernel_elements(order, layout)
        n_el = np.concatenate([[0], np.cumsum(layout.size[order])])
        for k in range(layout.n_kernels + 1):
            kept, elements = ranked.kept(k)
            assert kept.dtype == elements.dtype == np.int64
            assert np.array_equal(kept, np.sort(order[:k])), (trial, k)
            assert np.array_equal(elements, np.sort(rank_el[: n_el[k]])), (trial, k)


def test_ties_between_a_convolution_and_a_weight_rank_by_index() -> None:
    """A 2x2 convolution kernel of four equal magnitudes 0.5 has the rms score 0.5 exactly, the score of a weight
    of 0.5: the lower kernel index ranks first, whichever tensor it is in."""
    shapes = [(1, 2, 2, 2), (3,), (2, 2, 2, 2), (2,)]
    flat = np.zeros(sum(math.prod(s) for s in shapes), dtype=np.float32)
    flat[0:4] = [0.5, -0.5, 0.5, 0.5]  # kernel 0: score 0.5
    flat[4:8] = 0.25  # kernel 1
    flat[8:11] = [0.5, 0.0, -0.5]  # kernels 2, 3, 4
    flat[11:15] = 0.5  # kernel 5
    flat[27:29] = [0.5, 0.75]  # kernels 9, 10
    layout = sparsify.kernel_layout(shapes)
    ranked = codec._Ranked(flat, layout, "rms")
    order, energy = _plain_ranking(flat, layout, "rms")
    assert order[:6].tolist() == [10, 0, 2, 4, 5, 9]
    assert np.array_equal(ranked.order, order)
    assert [ranked.energy(k) for k in range(layout.n_kernels + 1)] == energy.tolist()


def _quantised(mags: np.ndarray, uniforms: np.ndarray, known: codec._KnownLevels, searched: bool,
               positions: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """(indices, cache, terms) of codec._quantise over every element (in the order of ``positions``)."""
    at = np.arange(mags.size)
    cache, indices, terms = np.full(mags.size, -1), np.full(mags.size, -1), np.full(mags.size, np.nan)
    order = at if positions is None else positions
    codec._quantise(mags, at, order, uniforms, known.points, known.levels, searched, cache, indices, terms)
    return indices, cache, terms


def test_quantise_equals_rounded_levels_and_its_error() -> None:
    """Every regime of quantize.rounded_levels: L of the binary search and of the arithmetic, one interval, ranges
    a few float32 spacings wide (points that collide: zero widths), a collapsed range, magnitudes on, just below and
    just above every point and outside the range, uniforms at 0 and just below 1; float64 and float32 values,
    positions in any order; the error from the terms as rounded_levels sums them."""
    rng = np.random.default_rng(3)
    for trial in range(500):
        levels = int(rng.choice([1, 2, 3, 7, 15, 16, 63, 255, MAX_LEVELS, int(rng.integers(1, MAX_LEVELS + 1))]))
        lo = float(np.float32(abs(rng.normal()) * 10.0 ** rng.integers(-30, 3)))
        width = [abs(rng.normal()) * lo, 0.0, float(np.spacing(np.float32(lo))) * rng.integers(1, 40)][trial % 3]
        hi = float(np.float32(lo + width))
        points = quantize.quantization_points(levels, lo, hi).astype(np.float64)
        n = int(rng.integers(1, 300))
        mags = rng.uniform(lo, hi, n) if hi > lo else np.full(n, lo)
        near = np.concatenate([points, np.nextafter(points, 0), np.nextafter(points, np.inf), [0.0, 2 * hi + 1]])
        mags = np.concatenate([mags, near]).astype(np.float32).astype(np.float64)
        uniforms = rng.random(mags.size)
        uniforms[::5] = 0.0
        uniforms[1::7] = np.nextafter(1.0, 0.0)
        want, error = quantize.rounded_levels(mags, levels, lo, hi, uniforms, with_error=True)
        known = codec._KnownLevels(mags.size, uniforms, levels, lo, hi)
        if known.collapsed:
            assert not want.any()
            continue
        indices, cache, terms = _quantised(mags, uniforms, known, known.searched)
        assert np.array_equal(indices, want) and np.array_equal(cache, want), (trial, levels, lo, hi)
        assert float(np.clip(terms, 0.0, None).sum()) == error, (trial, levels)
        shuffled = rng.permutation(mags.size)
        indices32, _, _ = _quantised(mags.astype(np.float32), uniforms, known, known.searched, shuffled)
        assert np.array_equal(indices32, want), (trial, levels)
        if known.searched:  # where both apply, the arithmetic gives the search's interval
            assert np.array_equal(_quantised(mags, uniforms, known, False)[0], want), (trial, levels)


def test_kept_levels_equal_rounded_levels_of_the_kept_elements_in_any_order_of_k() -> None:
    """The level indices of the top k at one L and range, k growing, shrinking and growing again (the known ones
    read back, the new ones computed), equal quantize.rounded_levels over the kept elements, written into the
    previous k's buffers; a collapsed range gives zeros; an update with a NaN or an infinity falls back to arrays
    and gives rounded_levels' indices too."""
    rng = np.random.default_rng(4)
    for trial in range(80):
        flat, layout = _random_case(rng, trial)
        if trial % 10 == 9:
            flat[int(rng.integers(0, flat.size))] = np.inf if trial % 20 == 9 else np.nan
        ranked = codec._Ranked(flat, layout, "rms")
        assert (ranked._arrays is not None) == (not np.isfinite(flat).all())
        uniforms = rng.random(flat.size)
        n_k = layout.n_kernels
        ks = [int(k) for k in rng.integers(0, n_k + 1, 6)] + [n_k, 0]
        for levels in (1, 7, 255):
            known, buffers = None, None
            for k in ks:
                lo, hi = ranked.magnitude_range(k)
                if not (math.isfinite(lo) and math.isfinite(hi)):
                    continue
                if known is None or known.range != (lo, hi):
                    known = codec._KnownLevels(flat.size, uniforms, levels, lo, hi)
                if buffers is not None:  # the last k's arrays, written over
                    for b in buffers:
                        b[:] = -7
                kept, elements, indices, buffers = ranked.kept_levels(k, known, buffers)
                want_kept, want_elements = ranked.kept(k)
                assert np.array_equal(kept, want_kept) and np.array_equal(elements, want_elements)
                mags = np.abs(flat[elements]).astype(np.float64)
                want, _ = quantize.rounded_levels(mags, levels, lo, hi, uniforms[elements])
                assert indices.dtype == np.int64 and np.array_equal(indices, want), (trial, levels, k)


def test_energy_resumes_from_the_marked_states_at_block_boundaries() -> None:
    """Kernel counts that are and are not multiples of the marks' block, every k, against np.cumsum in rank
    order (k = n_kernels resumes from the state marked after the last rank)."""
    rng = np.random.default_rng(5)
    block = codec._ENERGY_BLOCK
    for shapes in ([(2 * block,)], [(block - 1,)], [(3, 1, 2, 2), (2 * block - 3,)], [(block, 1, 1, 1)], [(0,)]):
        n = sum(math.prod(s) for s in shapes)
        flat = (rng.normal(size=n) * rng.random(n)).astype(np.float32)
        layout = sparsify.kernel_layout(shapes)
        ranked = codec._Ranked(flat, layout, "rms")
        _, energy = _plain_ranking(flat, layout, "rms")
        got = np.array([ranked.energy(k) for k in range(layout.n_kernels + 1)])
        assert np.array_equal(got.view(np.uint64), energy.view(np.uint64)), shapes


def test_exact_sizes_from_the_last_plan_equal_those_from_a_pass_over_the_update() -> None:
    """The refinement's plans of k near the last one's (kernels merged in or left out of its arrays, into reused
    arrays of released plans) equal those of a fresh pass over the update (a new _ExactSizes per k): kept
    kernels, elements, level indices and sizes; k growing and shrinking, released and kept plans, the range
    changing with k (the smallest magnitude in the weights)."""
    from test_codec_shortcuts import _flat, _update

    rng = np.random.default_rng(6)
    for seed, smallest_in_conv in ((0, True), (1, False), (2, True)):
        update = _update(seed, smallest_in_conv=smallest_in_conv)
        flat = _flat(update)
        shapes = [tuple(v.shape) for v in update.values()]
        layout = sparsify.kernel_layout(shapes)
        ranked = codec._Ranked(flat, layout, "rms")
        merged = []
        incremental = ranked.kept_levels_from
        ranked.kept_levels_from = lambda *args: merged.append(args[0]) or incremental(*args)
        uniforms = np.random.default_rng(seed).random(flat.size)
        for levels in (1, 7, 255):
            exact = codec._ExactSizes(ranked, uniforms, levels, shapes)
            k = int(rng.integers(1, layout.n_kernels))
            for step in range(25):
                k = int(np.clip(k + rng.integers(-k // 20 - 1, k // 20 + 2), 0, layout.n_kernels))
                size, plan = exact(k)
                want_size, want = codec._ExactSizes(ranked, uniforms, levels, shapes)(k)
                assert size == want_size, (seed, levels, step, k)
                for a, b in ((plan.kept, want.kept), (plan.elements, want.elements), (plan.indices, want.indices)):
                    assert a.dtype == b.dtype == np.int64 and np.array_equal(a, b), (seed, levels, step, k)
                if rng.random() < 0.5:
                    exact.release(plan)
        # plans that came from the last one's arrays (none when the range changes with every k)
        assert len(merged) > 10 if smallest_in_conv else not merged
