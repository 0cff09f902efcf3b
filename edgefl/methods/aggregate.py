"""Aggregation rules as plain functions over states (dicts of tensors); methods compose them."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from edgefl.learning.workload import State

__all__ = ["weighted_mean_update", "apply_update", "fedavg_step"]


def weighted_mean_update(updates: Sequence[State], weights: Sequence[float]) -> State:
    """sum_i w_i u_i / sum_i w_i, element-wise (FedAvg's data-size weighting when w_i = |D_i|)."""
    if len(updates) != len(weights) or not updates:
        raise ValueError("weighted_mean_update: need as many weights as updates, at least one")
    total = float(sum(weights))
    if total <= 0:
        raise ValueError(f"weighted_mean_update: sum of weights={total}: must be > 0")
    out: State = {}
    for name in updates[0]:
        acc = torch.zeros_like(updates[0][name])
        for u, w in zip(updates, weights):
            acc.add_(u[name], alpha=float(w) / total)
        out[name] = acc
    return out


def apply_update(state: State, update: State) -> State:
    """w + u for every tensor."""
    return {name: state[name] + update[name] for name in state}


def fedavg_step(state: State, updates: Sequence[State], weights: Sequence[float]) -> State:
    """FedAvg's server step: w + sum_i w_i u_i / sum_i w_i; ``state`` unchanged when no update arrived."""
    if not updates:
        return state
    return apply_update(state, weighted_mean_update(updates, weights))
