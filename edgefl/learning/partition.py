"""Splitting a training set over devices. Every function returns one index array per device, disjoint."""

from __future__ import annotations

import numpy as np

__all__ = ["partition_iid", "partition_shards", "partition_by_owner"]


def partition_iid(n_samples: int, n_devices: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Shuffle and deal the samples into ``n_devices`` parts whose sizes differ by at most one."""
    if n_devices > n_samples:
        raise ValueError(f"n_devices={n_devices}: must be <= the number of training samples ({n_samples})")
    return [np.sort(p) for p in np.array_split(rng.permutation(n_samples), n_devices)]


def partition_shards(
    labels: np.ndarray, n_devices: int, classes_per_device: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """Label shards (McMahan et al.; HeteroFL/Luo "k classes per device").

    Samples are sorted by label and cut into ``n_devices * classes_per_device`` equal shards; each device
    receives ``classes_per_device`` shards chosen at random, so it sees at most that many classes.
    """
    n_shards = n_devices * classes_per_device
    if n_shards > labels.size:
        raise ValueError(
            f"n_devices*classes_per_device={n_shards}: must be <= the number of training samples ({labels.size})"
        )
    order = np.lexsort((rng.random(labels.size), labels))  # by label, ties in random order
    shards = np.array_split(order, n_shards)
    pick = rng.permutation(n_shards).reshape(n_devices, classes_per_device)
    return [np.sort(np.concatenate([shards[s] for s in row])) for row in pick]


def partition_by_owner(owner: np.ndarray, n_devices: int) -> list[np.ndarray]:
    """Data that already belongs to devices (Synthetic): device k gets the samples with ``owner == k``."""
    return [np.flatnonzero(owner == k) for k in range(n_devices)]
