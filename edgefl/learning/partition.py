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
