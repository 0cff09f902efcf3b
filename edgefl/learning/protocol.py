"""The learning protocol a run's workload implements, torch (:class:`~edgefl.learning.workload.Workload`) or
surrogate (:class:`~edgefl.learning.surrogate.SurrogateWorkload`), so that a round is played the same way for
both: the workload does the round's local work, moves the global state, and assesses it.

No torch here: surrogate runs never import it. ``method`` arguments are an :class:`edgefl.algorithms.base.Method`
and ``jobs`` a :class:`~edgefl.algorithms.base.JobTable` (not imported: methods build on learning, not back).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

__all__ = ["Learning", "RoundWork", "Assessment"]


@dataclass(frozen=True, eq=False)
class RoundWork:
    """What a round's jobs did, in job order: training FLOPs, payload bits, SGD steps and mean training loss
    (each shape (m,), NaN loss for a job that did not train) and the updates (None under surrogate learning)."""

    flops: np.ndarray
    bits: np.ndarray
    steps: np.ndarray
    losses: np.ndarray
    updates: Sequence[Any]


@dataclass(frozen=True)
class Assessment:
    """The global model after a round: test accuracy in [0, 1], test loss, training loss (mean over the round's
    jobs, or the surrogate's loss) and the global training loss F(w) (NaN where not measured)."""

    test_accuracy: float
    test_loss: float
    train_loss: float
    global_train_loss: float


class Learning(Protocol):
    """What the runner and the methods use of a workload (sizes in FLOPs and bits, the round's work)."""

    trains: bool
    """True when local work is real training (torch); False when a convergence bound stands in for it."""

    n_samples: np.ndarray
    train_config: Any

    def flops_per_sample(self, width: float | None = None) -> Any: ...

    def samples_per_round(self, device: Any) -> np.ndarray: ...

    @property
    def update_bits(self) -> int: ...

    def update_bits_at(self, width: float) -> int:
        """Bits of the uncompressed width-``width`` (sub)model: what a device downloads."""
        ...

    def initial_state(self) -> Any: ...

    def work(self, method: Any, jobs: Any, state: Any, round_index: int) -> RoundWork:
        """Do the round's local work of ``jobs`` (called when the devices start, after the downlink)."""
        ...

    def advance(self, method: Any, state: Any, jobs: Any, work: RoundWork, kept: np.ndarray,
                n_selected: int) -> Any:
        """The next global state from the kept jobs (indices into ``jobs``, arrival order)."""
        ...

    def assess(self, method: Any, state: Any, work: RoundWork, *, evaluate: bool, global_loss: bool) -> Assessment:
        """Measure the new global state (``evaluate``: on the test set this round)."""
        ...
