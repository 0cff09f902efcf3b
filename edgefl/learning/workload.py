"""The learning workload of a run: data on each device, the model, local training and evaluation (real torch).

Methods never touch datasets or training loops directly; they call :meth:`Workload.train` with a global
state and get back the update ``u = w_after - w_before`` plus what was computed (samples, FLOPs).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
import torch
from torch import nn

from edgefl.learning.data_sizes import DataSizes
from edgefl.errors import DivergedError, ScenarioError
from edgefl.learning import partition as part
from edgefl.learning.datasets import (
    Dataset, load_cifar10, load_digits, load_fashion_mnist, load_mnist, make_synthetic, subset,
)  # fmt: skip
from edgefl.learning.flops import measure_train_flops_per_sample
from edgefl.learning.models import build_model, init_parameters
from edgefl.learning.config import (
    BITS_PER_PARAMETER, LocalTrainConfig, local_train_config, samples_per_round, scheduled_lr,
)
from edgefl.learning.train import evaluate, local_train, local_train_many, trains_together
from edgefl.scenario.sections import DataConfig, ModelConfig, TrainConfig
from edgefl.seeding import Streams

__all__ = ["Workload", "State", "TrainResult", "check_finite", "state_bits", "torch_device"]

State = dict[str, torch.Tensor]
"""A model's parameters by name (float32 tensors); the global model and updates use this form."""

_FLOPS_CACHE: dict[tuple, float] = {}


def torch_device(name: str) -> torch.device:
    """The torch device of ``train.device``: ``"cpu"``, ``"cuda"`` (a CUDA GPU torch sees; else a one-line
    :class:`ScenarioError`) or ``"auto"`` (CUDA when torch sees one, else the CPU). On a GPU, torch's
    deterministic algorithms are switched on, so that a run gives the same tables each time it runs there, and
    TF32 off, so that float32 is float32 there as on the CPU."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda":
        if not torch.cuda.is_available():
            raise ScenarioError("train.device='cuda': torch sees no CUDA GPU here (torch.cuda.is_available() is "
                                "False); use 'cpu' or 'auto'")  # fmt: skip
        import os

        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # what deterministic cuBLAS needs
        torch.use_deterministic_algorithms(True)
        # float32 as on the CPU: no TF32 tensor-core rounding (10-bit mantissas) in convolutions and matmuls, which
        # moved a vectorised LeNet-5 update 2e-3 of itself from one-by-one training on an H100
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    return torch.device(name)


def state_bits(state: State) -> int:
    """Size of an uncompressed float32 payload [bits]."""
    return BITS_PER_PARAMETER * sum(int(t.numel()) for t in state.values())


def check_finite(update: State, device: int, round_index: int) -> State:
    """``update`` itself when every element is finite; :class:`~edgefl.errors.DivergedError` naming the device
    and the round otherwise (a diverged training is stopped here, before any codec or aggregation sees it). One
    pass per tensor, on the tensor's own device: its sum, which is finite only if every element is (a NaN or an
    infinity makes it NaN or infinite); only a sum that is not (or overflows) is looked at element by element."""
    for tensor in update.values():
        if not bool(torch.isfinite(tensor.sum())) and not bool(torch.isfinite(tensor).all()):
            raise DivergedError(device, round_index)
    return update


def _update(after: State, before: State) -> tuple[State, State | None]:
    """``after - before`` by name in ``after``'s order on the CPU, and on the GPU too when ``after`` lives there
    (``before`` is the CPU's state): float32 differences, the same bits on either device."""
    if next(iter(after.values())).device.type == "cpu":
        return {name: after[name] - before[name] for name in after}, None
    trained = {name: after[name] - before[name].to(after[name].device) for name in after}
    return {name: t.cpu() for name, t in trained.items()}, trained


@dataclass(frozen=True, kw_only=True)
class TrainResult:
    """One device's local training: update (w_after - w_before) on the CPU, samples used, FLOPs computed, mean
    loss; ``trained``: the same update on the GPU that trained it (None on the CPU), where the codecs read it
    (:attr:`on_device`)."""

    update: State
    n_samples: int
    steps: int
    samples_processed: int
    flops: float
    train_loss: float
    trained: State | None = None

    @property
    def on_device(self) -> State:
        """The update where it was trained: the GPU's copy, or :attr:`update` on the CPU."""
        return self.update if self.trained is None else self.trained

    @property
    def device(self) -> torch.device:
        """Where the update was trained (and its codec draws and runs)."""
        return next(iter(self.on_device.values())).device


LABEL_SKEWED = ("shards", "dirichlet", "gamma_mix")
"""Partitions whose devices hold only some of the classes."""


class Workload:
    """Dataset split over devices + model factory + the shared trainer (the
    :class:`~edgefl.learning.protocol.Learning` protocol with real torch training), built from its own data,
    model and training configs and the fleet's size: ``data``, ``model`` (its ``width`` the global model's) and
    ``train_schedule`` (the local SGD settings and the learning-rate schedule) are those configs."""

    trains = True

    def __init__(
        self, *, data: DataConfig, model: ModelConfig, train: TrainConfig, n_devices: int, streams: Streams,
        data_sizes: DataSizes | None = None,
    ) -> None:  # fmt: skip
        """``n_devices``: devices N the training set is partitioned over; ``data_sizes``: a device table's
        ``n_samples`` / ``data_share``, which resize the partition (None: the partition rule's sizes)."""
        self.streams = streams
        self.data = data
        self.model = model
        self.train_schedule = train
        d, n = data, n_devices
        self.dataset: Dataset = subset(
            _load(d, n, streams.numpy("dataset")), max_train=d.max_train_samples, max_test=d.max_test_samples,
            rng=streams.numpy("subset"),
        )  # fmt: skip
        try:
            parts = _partition(d, self.dataset, n, streams.numpy("partition"))
            if data_sizes is not None:  # a device table's n_samples / data_share
                parts = data_sizes.resize(parts, int(self.dataset.x_train.shape[0]))
        except ValueError as exc:
            raise ScenarioError(f"data.partition={d.partition!r} with fleet.n_devices={n}: {exc}") from None
        if any(p.size == 0 for p in parts):
            raise ScenarioError(f"fleet.n_devices={n}: some device would hold no training sample")
        self.partitions = parts
        self.device = torch_device(train.device)
        on = self.device
        self.x_train = torch.from_numpy(self.dataset.x_train).to(on)
        self.y_train = torch.from_numpy(self.dataset.y_train).to(on)
        self.x_test = torch.from_numpy(self.dataset.x_test).to(on)
        self.y_test = torch.from_numpy(self.dataset.y_test).to(on)
        self._device_data = [(self.x_train[p], self.y_train[p]) for p in parts]
        self._labels = [torch.from_numpy(self.dataset.y_train[p]) for p in parts]  # on the CPU, for the server
        self.train_config = local_train_config(self.train_schedule)
        self._models: dict[float, nn.Module] = {}

    # ------------------------------------------------------------------ model
    @cached_property
    def n_samples(self) -> np.ndarray:
        """Training samples per device, shape (n_devices,)."""
        return np.array([p.size for p in self.partitions], dtype=np.int64)

    def make_model(self, width: float = 1.0) -> nn.Module:
        m = self.model
        return build_model(
            m.name, input_shape=self.dataset.input_shape, n_classes=self.dataset.n_classes, hidden=m.hidden,
            width=width,
        )  # fmt: skip

    def _model(self, width: float) -> nn.Module:
        # one reusable module per width: loading a state into it is cheaper than building a model per client
        if width not in self._models:
            self._models[width] = self.make_model(width).to(self.device)
        return self._models[width]

    def initial_state(self) -> State:
        """The global model at round 0: initialised from the ``torch_init`` stream, or all zeros
        (``model.init = "zeros"``, Luo et al.'s Algorithm 1 starts from w_0 = 0)."""
        model = init_parameters(self.make_model(self.model.width), self.streams.torch("torch_init"))
        state = {k: v.detach().clone() for k, v in model.named_parameters()}
        if self.model.init == "zeros":
            state = {k: torch.zeros_like(v) for k, v in state.items()}
        return state

    def saved_state(self, state: State) -> dict:
        """The state's tensors, copied (what ``torch.load(weights_only=True)`` reads back)."""
        return {k: x.detach().clone() for k, x in state.items()}

    def state_from_saved(self, saved: dict) -> State:
        return saved

    def flops_per_sample(self, width: float | None = None) -> float:
        """Measured training FLOPs (forward + backward) per sample for this architecture and width (cached)."""
        width = self.model.width if width is None else width
        m = self.model
        key = (m.name, m.hidden, self.dataset.input_shape, self.dataset.n_classes, float(width))
        if key not in _FLOPS_CACHE:  # an architecture's FLOPs never change: measure once per process
            _FLOPS_CACHE[key] = measure_train_flops_per_sample(
                lambda: self.make_model(width), self.dataset.input_shape, self.dataset.n_classes
            )
        return _FLOPS_CACHE[key]

    def samples_per_round(self, device: int | np.ndarray) -> np.ndarray:
        """Samples one local run processes on each device (epochs x local size, or steps x batch)."""
        return samples_per_round(self.train_config, self.n_samples[device])

    def update_bits_at(self, width: float) -> int:
        """Size of an uncompressed float32 update of the width-``width`` submodel [bits]."""
        return state_bits(dict(self._model(width).named_parameters()))  # the reusable module: no extra model

    @cached_property
    def update_bits(self) -> int:
        """Size of an uncompressed float32 update of the full model [bits]."""
        return self.update_bits_at(self.model.width)

    @property
    def labels_skewed(self) -> bool:
        """Whether the partition gives devices only some classes (shards, dirichlet, gamma_mix)."""
        return self.data.partition in LABEL_SKEWED

    def submodel_shapes(self, width: float):
        """Parameter shapes of the width-``width`` submodel (:func:`edgefl.learning.slicing.submodel_shapes`)."""
        from edgefl.learning.slicing import submodel_shapes

        m = self.model
        return submodel_shapes(
            m.name, input_shape=self.dataset.input_shape, n_classes=self.dataset.n_classes, width=width,
            hidden=m.hidden,
        )  # fmt: skip

    def output_layer(self):
        """Names of the model's output layer parameters (:func:`edgefl.learning.models.output_layer`)."""
        from edgefl.learning.models import output_layer

        return output_layer(self.model.name, hidden=self.model.hidden)

    # ------------------------------------------------------------------ train / evaluate
    def warm_up(self) -> None:
        """One SGD step of a fresh full-width model on the first device with data, thrown away: a new worker
        process pays its first training's one-off costs here, when it starts, and not inside its first round's
        jobs (building torch's first optimiser imports its compiler front end: about 1.4 s on the 2-core VM). No
        stream is drawn from, no reusable module is touched, and torch's global generator is restored after."""
        data = next(((x, y) for x, y in self._device_data if x.shape[0]), None)
        if data is None:
            return
        x, y = data
        cfg = replace(self.train_config, steps=1, epochs=1)
        with torch.random.fork_rng(devices=[]):
            local_train(self.make_model(self.model.width).to(x.device), x, y, cfg, torch.Generator().manual_seed(0))

    def train(
        self,
        device: int,
        global_state: State,
        *,
        round_index: int,
        width: float | None = None,
        class_mask: torch.Tensor | None = None,
        steps: int | None = None,
        penalty: Callable[[nn.Module], torch.Tensor] | None = None,
    ) -> TrainResult:
        """Train a copy of ``global_state`` on ``device``'s data; batches from stream (torch_batches, round, device).

        ``width`` defaults to the scenario's model width (the full global model); for a narrower submodel
        ``global_state`` holds its (sliced) parameters. ``class_mask``: masked cross-entropy (HeteroFL).
        ``steps``: run exactly that many SGD steps instead of the scenario's epochs/steps (FedNova's tau_i).
        ``penalty``: a term added to each batch's loss (see :func:`~edgefl.learning.train.local_train`).
        """
        width = self.model.width if width is None else width
        model = self._loaded(global_state, width)
        x, y = self._device_data[device]
        cfg = self.train_config if steps is None else replace(self.train_config, steps=int(steps), epochs=1)
        cfg = self._scheduled(cfg, round_index)
        stats = local_train(
            model, x, y, cfg, self.streams.torch("torch_batches", round_index, device), class_mask=class_mask,
            penalty=penalty,
        )  # fmt: skip
        with torch.no_grad():
            update, trained = _update({name: p.detach() for name, p in model.named_parameters()}, global_state)
        return TrainResult(
            update=check_finite(update, device, round_index),
            n_samples=int(x.shape[0]),
            steps=stats.steps,
            samples_processed=stats.samples,
            flops=self.flops_per_sample(width) * stats.samples,
            train_loss=stats.mean_loss,
            trained=trained,
        )

    def _scheduled(self, cfg: LocalTrainConfig, round_index: int) -> LocalTrainConfig:
        """``cfg`` with round ``round_index``'s learning rate (``train.lr_schedule``); rounds are 1-based."""
        return replace(cfg, lr=scheduled_lr(self.train_schedule, cfg.lr, round_index))

    def train_many(
        self,
        devices: np.ndarray,
        start: State | Sequence[State],
        *,
        round_index: int,
        width: float | None = None,
        steps: int | None = None,
        class_masks: torch.Tensor | None = None,
    ) -> list[TrainResult] | None:
        """:meth:`train` for several devices at once, vectorised over devices
        (:func:`~edgefl.learning.train.local_train_many`): each device trains from ``start`` (one state, or one
        per device) at ``width`` with ``steps`` and its row of ``class_masks`` (bool, shape (D, n_classes)) as
        :meth:`train` takes them, drawing its batches from its own (torch_batches, round, device) stream, so it
        ends where :meth:`train` would, up to float rounding. None when fewer than two devices or the model or the
        settings do not allow it (:func:`~edgefl.learning.train.trains_together`): train one by one then."""
        width = self.model.width if width is None else width
        model = self._model(width)
        cfg = self._config(steps, round_index)
        if len(devices) < 2 or not trains_together(model, cfg):
            return None
        owned = [torch.from_numpy(self.partitions[int(d)]) for d in devices]
        gens = [self.streams.torch("torch_batches", round_index, int(d)) for d in devices]
        final, stats = local_train_many(
            model, start, self.x_train, self.y_train, owned, cfg, gens, class_masks=class_masks
        )  # fmt: skip
        starts = [start] * len(owned) if isinstance(start, dict) else list(start)
        flops = self.flops_per_sample(width)
        results = []
        for i, st in enumerate(stats):
            update, trained = _update({name: final[name][i] for name in starts[i]}, starts[i])
            results.append(TrainResult(
                update=check_finite(update, int(devices[i]), round_index),
                n_samples=int(owned[i].numel()), steps=st.steps, samples_processed=st.samples,
                flops=flops * st.samples, train_loss=st.mean_loss, trained=trained,
            ))  # fmt: skip
        return results

    def vectorises(self, width: float | None = None, steps: int | None = None, *, auto: bool = False) -> bool:
        """Whether jobs training at ``width`` with ``steps`` (as :meth:`train` takes them) are trained together
        (:meth:`train_many`), by ``train.vectorise``: ``"off"`` never; ``"on"`` whenever the model and the SGD
        settings allow it (:func:`~edgefl.learning.train.trains_together`); ``"auto"`` (the default) only for a
        training marked ``auto`` (FedAvg's own device side) with a fixed step count (``train.local_steps``) on a
        model whose registry entry says vectorised training was measured faster on the CPU
        (:attr:`~edgefl.learning.models.ModelEntry.vectorise`), and on a GPU whenever the model and settings allow
        it, as ``"on"`` (one NVIDIA H100: 6-15x faster than one by one for every model that allows it,
        ``benchmarks/vectorised_training.py --device cuda``)."""
        mode = self.train_schedule.vectorise
        if mode == "off":
            return False
        width = self.model.width if width is None else width
        cfg = self._config(steps, 1)
        if not trains_together(self._model(width), cfg):
            return False
        if mode == "on" or self.device.type == "cuda":
            return True
        from edgefl.learning.models import MODELS

        return auto and steps is None and cfg.steps > 0 and MODELS[self.model.name].vectorise

    def _config(self, steps: int | None, round_index: int) -> LocalTrainConfig:
        """The local SGD settings of round ``round_index`` (``steps``: that many steps, else the scenario's)."""
        cfg = self.train_config if steps is None else replace(self.train_config, steps=int(steps), epochs=1)
        return self._scheduled(cfg, round_index)

    def global_train_loss(self, state: State) -> float:
        """F(w): mean cross-entropy of a full-width global state over every device's training data."""
        x, y = self._used_train
        return evaluate(self._loaded(state), x, y)[1]

    @cached_property
    def _used_train(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Every device's training samples, device by device (built on the first :meth:`global_train_loss`)."""
        used = np.concatenate(self.partitions)
        return self.x_train[used], self.y_train[used]

    def device_labels(self, device: int) -> torch.Tensor:
        """Training labels held by ``device``, shape (n_i,), on the CPU."""
        return self._labels[device]

    def _loaded(self, state: State, width: float | None = None) -> nn.Module:
        """The reusable module of ``width`` (default: the model config's) holding ``state``'s parameters."""
        model = self._model(self.model.width if width is None else width)
        with torch.no_grad():
            for name, p in model.named_parameters():
                p.copy_(state[name])
        return model

    def eval_model(self, state: State, *, bn_clients: int = 0) -> nn.Module:
        """The full-width global model ready for inference.

        A model with batch norm (HeteroFL's static BN) first gets its statistics by querying the clients'
        data in turn (the first ``bn_clients`` devices, 0 = all), never a central copy of the training set.
        """
        model = self._loaded(state)
        if any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules()):
            from edgefl.learning.batchnorm import accumulate_bn_statistics, with_static_bn

            n = len(self._device_data) if bn_clients <= 0 else min(bn_clients, len(self._device_data))
            bs = self.train_config.batch_size
            clients = ((x[i : i + bs] for i in range(0, x.shape[0], bs)) for x, _ in self._device_data[:n])
            model = with_static_bn(model, accumulate_bn_statistics(model, clients))
        return model

    def evaluate(self, state: State, *, bn_clients: int = 0) -> tuple[float, float]:
        """(test accuracy, test loss) of a full-width global state (static BN: see :meth:`eval_model`)."""
        return evaluate(self.eval_model(state, bn_clients=bn_clients), self.x_test, self.y_test)


def _load(d: DataConfig, n_devices: int, rng: np.random.Generator) -> Dataset:
    """The data config's dataset (loaders raise DataError naming the paths searched when files are missing)."""
    if d.dataset == "digits":
        return load_digits(test_fraction=d.test_fraction, rng=rng)
    if d.dataset == "synthetic":
        return make_synthetic(
            n_devices=n_devices, alpha=d.synthetic_alpha, beta=d.synthetic_beta,
            samples_mean=d.synthetic_samples_mean, test_fraction=d.test_fraction, rng=rng,
        )  # fmt: skip
    loader = {"fmnist": load_fashion_mnist, "mnist": load_mnist, "cifar10": load_cifar10}[d.dataset]
    return loader(d.data_dir, normalize=d.normalize)


def _partition(d: DataConfig, ds: Dataset, n: int, rng: np.random.Generator) -> list[np.ndarray]:
    """One index array per device over the training set, by the data config's partition rule."""
    if ds.owner_train is not None:  # Synthetic data already belongs to devices
        return part.partition_by_owner(ds.owner_train, n)
    y = ds.y_train
    if d.partition == "iid":
        return part.partition_iid(y.size, n, rng)
    if d.partition == "shards":
        return part.partition_shards(y, n, d.classes_per_device, rng)
    if d.partition == "dirichlet":
        return part.partition_dirichlet(y, n, d.dirichlet_alpha, rng)
    if d.partition == "gamma_mix":
        k = d.classes_per_device if d.gamma_shards else None
        return part.partition_gamma_mix(y, n, d.gamma, rng, classes_per_device=k)
    return part.partition_power_law(y.size, n, rng, mean_size=d.mean_size, std_size=d.std_size)
