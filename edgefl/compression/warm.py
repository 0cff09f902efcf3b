"""Load a codec's compiled kernels before its first real update (:mod:`.jit`: numba compiles on first call, or
loads the compiled code cached on disk, a few milliseconds to seconds per kernel).

A worker process of an executor calls :func:`warm_up` for its method's codec when it starts, so that its first
round's jobs do not pay that: the codec's encoders, budget searches and decoders run once on a small random
update (a convolution-like tensor and a long vector, float32 as a trained update), taking the same code paths
with the same argument types as a real update does.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["CODECS", "warm_up"]

CODECS = ("anycostfl", "topk")
"""The codecs :func:`warm_up` knows: AnycostFL's FGC, top-k quantisation (QSGD, FedHQ)."""


def _update() -> dict[str, torch.Tensor]:
    rng = np.random.default_rng(0)
    return {"conv": torch.from_numpy(rng.normal(0, 0.02, (16, 3, 3, 3)).astype(np.float32)),
            "fc": torch.from_numpy(rng.normal(0, 0.02, 6000).astype(np.float32))}  # fmt: skip


def warm_up(codec: str) -> None:
    """Run ``codec``'s (one of :data:`CODECS`) encoders, searches and decoders once on a small random update."""
    from edgefl.compression import codec as fgc
    from edgefl.compression.search import SizeFunction, largest_fitting

    update = _update()
    names = list(update)
    n = sum(v.numel() for v in update.values())
    if codec == "anycostfl":
        for share in (0.05, 0.4):
            packed = fgc.compress(update, budget_bits=share * 32 * n, rng=np.random.default_rng(1))
            fgc.decode_with_mask(packed.payload, names)
    elif codec == "topk":
        for budget in (0.1 * 32 * n, 3.0 * n):
            sizer = fgc.TopkQuantSizer(update, np.random.default_rng(2))
            k = largest_fitting(lambda k: sizer.bits(k, 15), 0, sizer.n, budget)  # QSGD's search over k
            fgc.decode_with_mask(sizer.encode(k or 0, 15).payload, names)
            size = SizeFunction(lambda L: sizer.bits(n, L), lambda L, b: sizer.fits(n, L, b))
            levels = largest_fitting(size, 1, fgc.MAX_LEVELS, budget)  # FedHQ's search over L
            fgc.decode_with_mask(sizer.encode(n, levels or 1).payload, names)
    else:
        raise ValueError(f"codec={codec!r}: must be one of {CODECS}")
