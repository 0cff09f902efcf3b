"""The learning protocol a run's workload implements, torch (:class:`~edgefl.learning.workload.Workload`) or
surrogate (:class:`~edgefl.learning.surrogate.SurrogateWorkload`): sizes in FLOPs and bits, the local-training
settings and the initial global state; and the values a round's learning produces (:class:`RoundWork`,
:class:`Assessment`). The steps that move the global state are :mod:`edgefl.training.learner`'s.

No torch here: surrogate runs never import it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Callable

    import torch
    from torch import nn

    from edgefl.learning.workload import TrainResult

    State = dict[str, torch.Tensor]
    """A torch model's parameters by name (:data:`edgefl.learning.workload.State`)."""

__all__ = ["Learning", "Training", "RoundWork", "Assessment"]


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
    """What the runtime and the methods use of a workload (sizes in FLOPs and bits, the local-training settings)."""

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

    def saved_state(self, state: Any) -> dict:
        """A global state as a checkpoint holds it: plain numbers (JSON) when the workload does not train, else
        tensors (``torch.save``)."""
        ...

    def state_from_saved(self, saved: dict) -> Any:
        """The inverse of :meth:`saved_state`."""
        ...


class Training(Learning, Protocol):
    """What a training method uses besides :class:`Learning` of the torch workload
    (:class:`~edgefl.learning.workload.Workload`, ``trains`` True): its models, local training and evaluation."""

    def make_model(self, width: float = 1.0) -> nn.Module: ...

    def submodel_shapes(self, width: float) -> Mapping[str, torch.Size]: ...

    def output_layer(self) -> tuple[str, str]: ...

    def train(
        self, device: int, global_state: State, *, round_index: int, width: float | None = None,
        class_mask: torch.Tensor | None = None, steps: int | None = None,
        penalty: Callable[[nn.Module], torch.Tensor] | None = None,
    ) -> TrainResult: ...  # fmt: skip

    def train_many(
        self, devices: np.ndarray, start: State | Sequence[State], *, round_index: int, width: float | None = None,
        steps: int | None = None, class_masks: torch.Tensor | None = None,
    ) -> list[TrainResult] | None: ...  # fmt: skip

    def vectorises(self, width: float | None = None, steps: int | None = None, *, auto: bool = False) -> bool: ...

    def global_train_loss(self, state: State) -> float: ...

    def warm_up(self) -> None: ...

    def evaluate(self, state: State, *, bn_clients: int = 0) -> tuple[float, float]: ...
