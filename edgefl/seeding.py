"""Named, independent random streams derived from one scenario seed.

Each consumer (placement, mobility, fading, partition, selection, budgets, torch init, torch batches, ...)
gets its own ``numpy.random.SeedSequence`` keyed by (seed, consumer name[, round[, device]]). A stream does
not depend on how many other streams were drawn before it, so adding a consumer, resuming at round r or
running one device's job elsewhere reproduces the same numbers.
"""

from __future__ import annotations

import functools
import hashlib

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

__all__ = ["LazyGenerator", "Streams"]


@functools.lru_cache(maxsize=None)
def _name_key(name: str) -> int:
    # A stable 32-bit key per consumer name (Python's hash() is salted per process).
    return int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:4], "little")


class Streams:
    """Factory of reproducible generators for one scenario seed."""

    def __init__(self, seed: int) -> None:
        if seed < 0:
            raise ValueError(f"seed={seed}: must be >= 0")
        self.seed = int(seed)

    def seed_sequence(self, name: str, *keys: int) -> np.random.SeedSequence:
        """The SeedSequence for consumer ``name`` and integer sub-keys (e.g. round, device)."""
        return np.random.SeedSequence([self.seed, _name_key(name), *[int(k) for k in keys]])

    def numpy(self, name: str, *keys: int) -> np.random.Generator:
        """A numpy Generator (PCG64) for consumer ``name`` and sub-keys."""
        return np.random.Generator(np.random.PCG64(self.seed_sequence(name, *keys)))

    def lazy_numpy(self, name: str, *keys: int) -> LazyGenerator:
        """The generator :meth:`numpy` gives, built on its first use (a stream that is seldom drawn from, such
        as a method's per-round stream, then costs nothing: building one takes about 13 us)."""
        return LazyGenerator(lambda: self.numpy(name, *keys))

    def torch(self, name: str, *keys: int) -> torch.Generator:
        """A CPU torch.Generator seeded from the same derivation as :meth:`numpy`."""
        import torch  # imported here: surrogate runs never load torch

        state = self.seed_sequence(name, *keys).generate_state(2, dtype=np.uint32)
        g = torch.Generator()
        g.manual_seed(int(state[0]) << 32 | int(state[1]))
        return g


class LazyGenerator:
    """Stands for a ``numpy.random.Generator`` that ``make()`` builds on the first attribute access; every
    attribute is then the generator's, so draws are the same as from the generator itself."""

    __slots__ = ("_make", "_rng")

    def __init__(self, make) -> None:
        self._make = make
        self._rng: np.random.Generator | None = None

    @property
    def used(self) -> bool:
        """Whether anything has been drawn from (or asked of) the generator."""
        return self._rng is not None

    def __getattr__(self, name: str):
        if self._rng is None:
            self._rng = self._make()
        return getattr(self._rng, name)
