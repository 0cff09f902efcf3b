"""The small protocol every FL method implements: plan a round, produce one device's update, aggregate.

The runner only sees :class:`DeviceJob`, :class:`TrainJob` and :class:`ClientUpdate`; it never knows which method
produced them. A method's device side (:meth:`Method.client_update`) works on a :class:`TrainJob`, a value that
holds everything one device's work needs besides the trainer (its data), so an executor can run it anywhere.
A method plans each job's costs with the run's cost model (:mod:`edgefl.fleet.costs`); the runner charges what was
really done (FLOPs of what trained, bits of what was built, SGD steps) with the same model, and both are
recorded side by side: a job that ran as planned is charged exactly its plan.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from edgefl.scenario.section_base import Strict

if TYPE_CHECKING:
    from pydantic import BaseModel

    from edgefl.fleet.costs import CostModel
    from edgefl.learning.protocol import Learning, State, Training
    from edgefl.learning.workload import TrainResult
    from edgefl.seeding import LazyGenerator, Streams
    from edgefl.fleet.devices import Fleet

__all__ = [
    "Needs", "MethodSetup", "RoundContext", "DeviceJob", "JobTable", "RoundPlan", "TrainJob", "ClientUpdate",
    "DenseUpdate", "LocalTraining", "NoSettings", "Method", "vectorisable", "dense_bytes",
]  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Needs:
    """What a method requires of a scenario; checked when the scenario loads (one line naming method and need).

    ``deadline``: plans for a round deadline T_max (``round.policy = "deadline"``); ``budget``: plans for a
    per-round energy budget E_max (``fleet.budget.kind`` not ``"none"``); ``surrogate``: its plan needs no real
    model, so ``learning = "surrogate"`` can stand in for training; ``cost_modes``: the cost modes of
    :class:`edgefl.fleet.costs.CostModel` it can plan in (``"physical"``, ``"per_step"``); ``asynchronous``: it has no
    rounds but server updates (:class:`edgefl.engine.async_driver.AsyncDriver` plays it; it then implements
    :class:`edgefl.methods.asynchronous.AsyncMethod`'s ``buffer_size``, ``weights`` and ``server_step``).
    """

    deadline: bool = False
    budget: bool = False
    surrogate: bool = False
    cost_modes: tuple[str, ...] = ("physical", "per_step")
    asynchronous: bool = False


@dataclass(frozen=True, kw_only=True)
class MethodSetup:
    """What a method is built with besides its own settings (it never sees the scenario).

    ``workload``: the learning workload (:class:`~edgefl.learning.protocol.Learning`, torch or surrogate: sizes,
    FLOPs; the torch one is also a :class:`~edgefl.learning.protocol.Training`: the trainer); ``costs``: the cost model;
    ``streams``: the run's random streams (a method draws only from streams named for it); ``n_devices`` N,
    ``clients_per_round`` K, ``rounds`` T; ``width``: the global model's width.
    """

    workload: Learning
    costs: CostModel
    streams: Streams
    n_devices: int
    clients_per_round: int
    rounds: int
    width: float = 1.0


@dataclass(frozen=True, kw_only=True)
class RoundContext:
    """What a method knows when it plans round ``round_index`` (1-based).

    ``selected``: device ids chosen by the server, shape (k,). ``rate_bps``, ``e_max_j``: this round's uplink
    rate [bit/s] (assuming every selected device transmits) and energy budget [J] for compute and upload (inf =
    none; net of the planned download's energy, which the budget pays first), shape (n,).
    ``t_budget_s``: the time a device has for compute and upload, the round deadline net of the downlink [s],
    or None without a deadline. ``costs``: the cost model (``costs.fleet`` the devices); ``rng``: this round's
    stream for the method (built on its first use, :class:`edgefl.seeding.LazyGenerator`). ``cpu_hz``: the CPU
    frequency [Hz] the round's allocation (``channel.allocation``) set for each selected device, shape (n,), which a
    method that takes the whole allocation (:attr:`Method.takes_allocation` ``"all"``) runs at; None under
    ``"equal"`` (the method chooses). Under an allocation ``rate_bps`` and ``costs`` are the allocated bandwidth's
    and power's.
    """

    round_index: int
    selected: np.ndarray
    rate_bps: np.ndarray
    e_max_j: np.ndarray
    t_budget_s: float | None
    costs: CostModel
    rng: np.random.Generator | LazyGenerator
    cpu_hz: np.ndarray | None = None

    @property
    def fleet(self) -> Fleet:
        """The devices (the cost model's fleet)."""
        return self.costs.fleet


@dataclass(frozen=True, kw_only=True)
class DeviceJob:
    """One device's work in a round, with the knobs the method chose and the costs it planned."""

    device: int
    cpu_hz: float
    width: float = 1.0
    alpha: float = math.nan
    beta: float = math.nan
    local_steps: int = 0
    bits_planned: float = math.nan
    t_cmp_planned_s: float = math.nan
    t_com_planned_s: float = math.nan
    e_cmp_planned_j: float = math.nan
    e_com_planned_j: float = math.nan


_JOB_FLOAT_COLUMNS = (
    "cpu_hz", "width", "alpha", "beta", "bits_planned",
    "t_cmp_planned_s", "t_com_planned_s", "e_cmp_planned_j", "e_com_planned_j",
)  # fmt: skip
_JOB_DEFAULTS = {"width": 1.0, "local_steps": 0}


@dataclass(frozen=True, kw_only=True, eq=False)
class JobTable:
    """A round's jobs as columns, one entry per device that trains; every field has shape (m,).

    Methods plan whole rounds with numpy, so the plan is a table; ``table[i]`` gives job i as a
    :class:`DeviceJob`. Build one with :meth:`build`, which broadcasts scalars and fills defaults
    (width 1, local_steps 0, NaN for costs the method did not plan).
    """

    device: np.ndarray
    cpu_hz: np.ndarray
    width: np.ndarray
    alpha: np.ndarray
    beta: np.ndarray
    local_steps: np.ndarray
    bits_planned: np.ndarray
    t_cmp_planned_s: np.ndarray
    t_com_planned_s: np.ndarray
    e_cmp_planned_j: np.ndarray
    e_com_planned_j: np.ndarray

    @classmethod
    def build(cls, device: np.ndarray, **columns: float | np.ndarray) -> JobTable:
        """Jobs for ``device`` (ids, shape (m,)); each column a scalar or an array of shape (m,)."""
        if "cpu_hz" not in columns:
            raise TypeError("JobTable.build: cpu_hz [Hz] is required")
        device = np.asarray(device, dtype=np.int64).reshape(-1)
        m = device.size
        unknown = set(columns) - set(_JOB_FLOAT_COLUMNS) - {"local_steps"}
        if unknown:
            raise TypeError(f"JobTable.build: unknown column(s) {sorted(unknown)}")
        out: dict[str, np.ndarray] = {"device": device}
        for name in (*_JOB_FLOAT_COLUMNS, "local_steps"):
            value = columns.get(name, _JOB_DEFAULTS.get(name, math.nan))
            dtype = np.int64 if name == "local_steps" else np.float64
            col = out[name] = np.empty(m, dtype=dtype)
            col[...] = np.asarray(value, dtype=dtype)  # a scalar broadcasts; another shape raises ValueError
        return cls(**out)

    def __len__(self) -> int:
        return int(self.device.size)

    def __getitem__(self, i: int) -> DeviceJob:
        return DeviceJob(
            device=int(self.device[i]),
            local_steps=int(self.local_steps[i]),
            **{name: float(getattr(self, name)[i]) for name in _JOB_FLOAT_COLUMNS},
        )

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def columns(self) -> dict[str, np.ndarray]:
        """The table's columns by name (its arrays, not copies)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def take(self, index: np.ndarray) -> JobTable:
        """The jobs at ``index`` (integer indices or a boolean mask)."""
        return JobTable(**{f.name: getattr(self, f.name)[index] for f in fields(self)})

    @classmethod
    def concat(cls, *tables: JobTable) -> JobTable:
        """One table of all jobs in ``tables``, sorted by device id (stable)."""
        cols = {f.name: np.concatenate([getattr(t, f.name) for t in tables]) for f in fields(cls)}
        order = np.argsort(cols["device"], kind="stable")
        return cls(**{k: v[order] for k, v in cols.items()})


@dataclass(frozen=True, eq=False)
class RoundPlan:
    """The jobs to run this round and the selected devices that sit it out.

    ``skipped_device``: ids, shape (s,); ``skipped_reason``: why, shape (s,) of str. ``upload_order``: under
    ``channel.access = "tdma"``, the jobs' device ids in the order they take the channel (shape (m,)); None, the
    default, serves them first come, first served, in the order they finish computing. A planner that schedules
    the uploads itself (an allocator, FedCS) sets it; under FDMA it plays no part.
    """

    jobs: JobTable
    skipped_device: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    skipped_reason: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))
    upload_order: np.ndarray | None = None

    def with_skipped(self, devices: np.ndarray, reasons: Sequence[str] | np.ndarray) -> RoundPlan:
        """This plan with ``devices`` (ids, shape (s,)) also sitting out, for ``reasons`` (shape (s,)), after
        the ones already skipped: a method that plans its trainers with another method's plan adds its own."""
        return replace(
            self,
            skipped_device=np.concatenate([self.skipped_device, devices]),
            skipped_reason=np.concatenate([self.skipped_reason, np.array(reasons, dtype=object)]),
        )


@dataclass(frozen=True)
class DenseUpdate:
    """Payload of a full uncompressed update: ``update`` = w_after - w_before, float32 tensors by name."""

    update: State


@dataclass(frozen=True, kw_only=True, eq=False)
class TrainJob:
    """One device's device-side work in a round (or an asynchronous dispatch), as a self-contained value: what
    the method's :meth:`Method.client_update` shrinks, trains and compresses, given only a trainer that holds the
    device's data (docs/architecture.md, "Training jobs and executors").

    ``job``: the device and the knobs and budget the method planned (its bits for the codec); ``round_index``:
    the round (server update), 1-based, which keys the job's random streams and the learning-rate schedule;
    ``start``: the model the device downloaded (the global state, or the method's submodel of it,
    :meth:`Method.download`); ``memory``: what the device kept from its previous job (STC's error-feedback
    residual, CC-FedAvg's history; None: nothing), :meth:`Method.device_memory`; ``streams``: the run's seed, from
    which the job's own streams are derived by (name, round, device) (:meth:`rng`), so a job draws the same
    numbers wherever it runs.
    """

    job: DeviceJob
    round_index: int
    start: Any
    memory: Any = None
    streams: Streams

    @property
    def device(self) -> int:
        return self.job.device

    def rng(self, name: str) -> np.random.Generator:
        """The job's numpy stream ``name`` (keyed by its round and device)."""
        return self.streams.numpy(name, self.round_index, self.job.device)


@dataclass(frozen=True, kw_only=True)
class ClientUpdate:
    """What a device built: the payload (a small frozen dataclass of its method), its aggregation weight, and
    what it cost (measured). ``bits``: encoded payload size [bits]; ``flops``: training FLOPs actually computed;
    ``memory``: what the device keeps for its next job (:attr:`TrainJob.memory`; None: the method keeps
    nothing), handed to :meth:`Method.remember`.
    """

    device: int
    payload: Any
    weight: float
    bits: float
    flops: float
    steps: int
    train_loss: float
    memory: Any = None


@dataclass(frozen=True, kw_only=True, eq=False)
class LocalTraining:
    """One job's local training as a value (:meth:`Method.local_training`): the arguments of its
    :meth:`~edgefl.learning.workload.Workload.train` call.

    ``start``: the state it trains from (the job's download); ``width``: the (sub)model's width multiplier (None:
    the model config's); ``steps``: that many SGD steps instead of the scenario's epochs/steps (None: the
    scenario's); ``class_mask``: bool, shape (n_classes,), masked cross-entropy (None: plain); ``auto``: whether
    ``train.vectorise = "auto"`` may train it with others (FedAvg's own device side, vectorised by default since it
    could be; every other training is vectorised only under ``"on"``, see :func:`edgefl.training.learner.training_groups`).
    """

    start: Any
    width: float | None = None
    steps: int | None = None
    class_mask: Any = None
    auto: bool = False

    def key(self, job: TrainJob) -> tuple:
        """What trainings must share to run together: round, width, step count, masked or not, ``auto``."""
        return (job.round_index, self.width, self.steps, self.class_mask is None, self.auto)


def vectorisable(method: Method) -> bool:
    """Whether ``method``'s :meth:`~Method.local_training` and :meth:`~Method.finish_update` describe its
    :meth:`~Method.client_update`: the more derived of the classes that define those two is the class that defines
    ``client_update`` or a subclass of it (a subclass that replaces ``client_update`` but inherits the other two
    trains its jobs one by one)."""

    def owner(name: str) -> type:
        return next(c for c in type(method).__mro__ if name in c.__dict__)

    train, finish = owner("local_training"), owner("finish_update")
    if train is Method or finish is Method:
        return False
    return issubclass(train if issubclass(train, finish) else finish, owner("client_update"))


def dense_bytes(tensors: Any) -> bytes:
    """An uncompressed update as it is charged (32 bits per element): its tensors' elements as little-endian
    float32, tensor after tensor in the mapping's order, each in row-major (C) order, with nothing between them."""
    parts = [np.asarray(t.detach().to("cpu").reshape(-1).numpy(), dtype="<f4") for t in tensors.values()]
    return b"".join(p.tobytes() for p in parts)


class NoSettings(Strict):
    """A method without settings of its own: its ``[method.<name>]`` table must be empty."""


class Method(ABC):
    """An FL method: plans a round, produces one device's update, aggregates.

    A subclass declares, as class attributes, everything the rest of edgefl needs to know about it:

    - ``name``: its registry name and the ``[method.<name>]`` table of its settings;
    - ``Settings``: the pydantic model of that table, every default defined there once;
    - ``needs``: :class:`Needs` (deadline, budget, surrogate learning, cost modes), checked at load;
    - ``device_columns``: extra ``device_rounds`` columns it fills through :meth:`device_values`;
    - ``plans_each_device_alone``: its plan of a selected device depends only on that device's entries of the
      context (``rate_bps``, ``e_max_j``), ``t_budget_s`` and the round, never on which other devices are
      selected nor on ``ctx.rng``, and its jobs follow ``ctx.selected``'s order. Then planning every device at
      once and taking the selected ones gives the same plan (the asynchronous driver does so once per server
      update, :mod:`edgefl.engine.async_driver`). A subclass that overrides :meth:`plan_round` is taken not to, unless
      it declares the flag again;
    - ``takes_allocation``: what it takes of the round's allocation (``channel.allocation`` other than
      ``"equal"``, :mod:`edgefl.fleet.allocation`): ``"all"`` (bandwidth, power and CPU frequency,
      :attr:`RoundContext.cpu_hz`), ``"radio"`` (bandwidth and power through ``ctx.rate_bps`` and ``ctx.costs``; it
      sets its own frequency) or ``"none"`` (refused at load). A subclass that overrides :meth:`plan_round` is taken
      to take none, unless it declares it again;
    - :meth:`plans_to_t_max`: whether, with given settings, its plan stretches a device's compute or upload to
      fill the round's T_max (:attr:`RoundContext.t_budget_s`'s value). Such a plan holds only when each upload
      starts as its compute ends (FDMA), so TDMA under a deadline refuses it at load. A subclass that overrides
      :meth:`plan_round` is taken to plan to T_max, unless it declares the method again.

    It is constructed with keyword arguments only: its settings and a :class:`MethodSetup`.
    """

    name: ClassVar[str]
    Settings: ClassVar[type[BaseModel]] = NoSettings
    needs: ClassVar[Needs] = Needs()
    device_columns: ClassVar[tuple[str, ...]] = ()
    plans_each_device_alone: ClassVar[bool] = False
    takes_allocation: ClassVar[str] = "none"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "plan_round" in cls.__dict__ and "plans_each_device_alone" not in cls.__dict__:
            cls.plans_each_device_alone = False
        if ("plan_round" in cls.__dict__ or "local_work" in cls.__dict__) and "takes_allocation" not in cls.__dict__:
            cls.takes_allocation = "none"
        if "plan_round" in cls.__dict__ and "plans_to_t_max" not in cls.__dict__:
            cls.plans_to_t_max = Method.__dict__["plans_to_t_max"]

    @classmethod
    def plans_to_t_max(cls, settings: BaseModel) -> bool:
        """Whether the plan under ``settings`` (its ``[method.<name>]`` table) depends on the value of T_max, not
        only on whether there is one (the class docstring); True unless a method says otherwise."""
        return True

    def __init__(self, *, settings: BaseModel | None = None, setup: MethodSetup) -> None:
        self.settings = type(self).Settings() if settings is None else settings
        self.setup = setup
        self.workload = setup.workload
        self.costs = setup.costs
        self.streams = setup.streams
        self._downloads: Any = None  # :meth:`sliced`'s submodels of the round (a Downloads, built on first use)

    @abstractmethod
    def plan_round(self, ctx: RoundContext) -> RoundPlan:
        """Choose which selected devices train and with which knobs, and what each job will cost
        (:attr:`costs`): the runner charges the work done with the same model."""

    def download(self, job: DeviceJob, *, state: State) -> State:
        """What ``job``'s device downloads of the global ``state`` and trains from (:attr:`TrainJob.start`): the
        whole model by default; a width-shrinking method's submodel."""
        return state

    def sliced(self, state: State, width: float) -> State:
        """The width-``width`` submodel of ``state`` (:func:`~edgefl.learning.slicing.slice_state`) as a
        width-shrinking method's :meth:`download`: cut once per global state and width and shared by the round's
        jobs of that width (:class:`~edgefl.learning.slicing.Downloads`)."""
        if self._downloads is None:
            from edgefl.learning.slicing import Downloads

            self._downloads = Downloads()
        return self._downloads.of(state, width, self.workload.submodel_shapes(width))

    def device_memory(self, device: int) -> Any:
        """What ``device`` kept from its previous job (:attr:`TrainJob.memory`); None by default."""
        return None

    def remember(self, updates: Sequence[ClientUpdate]) -> None:
        """Take note of the device-side work just done (every job that ran, arrived or not): keep each
        device's :attr:`ClientUpdate.memory`, count its rounds. Nothing by default."""

    def train_job(self, job: DeviceJob, *, state: State, round_index: int) -> TrainJob:
        """``job`` as a value for an executor: the device's download of ``state`` and its memory."""
        return TrainJob(
            job=job, round_index=round_index, start=self.download(job, state=state),
            memory=self.device_memory(job.device), streams=self.streams,
        )  # fmt: skip

    @abstractmethod
    def client_update(self, job: TrainJob, *, trainer: Training) -> ClientUpdate:
        """The device side: run ``job``'s local work for real on ``trainer`` (the device's data and the local
        training) and build its payload. It reads nothing but ``job``, ``trainer`` and what the method fixed when
        it was built (settings, per-device constants), so any executor can run it."""

    def local_training(self, job: TrainJob, *, trainer: Training) -> LocalTraining | None:
        """``job``'s local training as a value when its device side is one :meth:`Training.train` call followed by
        per-job work on the result (:meth:`finish_update`), so that an executor may train a group of such jobs
        together (:meth:`client_updates`); None (the default) when it is not (the job then runs
        :meth:`client_update` alone). A method that returns a value implements :meth:`finish_update`, and its
        :meth:`client_update` is :meth:`trained_update`."""
        return None

    def finish_update(self, job: TrainJob, res: TrainResult, *, trainer: Training) -> ClientUpdate:
        """The device side after ``job``'s local training ``res`` (:meth:`local_training`): compression, its
        bit-budget search, the device's memory; per job, whether the training ran alone or in a group."""
        raise NotImplementedError(f"method {self.name!r}: local_training without finish_update")

    def trained_update(self, job: TrainJob, *, trainer: Training) -> ClientUpdate:
        """:meth:`client_update` of a job with a :meth:`local_training`: that training alone on ``trainer``, then
        :meth:`finish_update`."""
        req = self.local_training(job, trainer=trainer)
        res = trainer.train(
            job.device, req.start, round_index=job.round_index, width=req.width, class_mask=req.class_mask,
            steps=req.steps,
        )  # fmt: skip
        return self.finish_update(job, res, trainer=trainer)

    def client_updates(self, jobs: Sequence[TrainJob], *, trainer: Training) -> list[ClientUpdate] | None:
        """Every job's :meth:`client_update` with their local trainings done together (vectorised over jobs,
        :meth:`~edgefl.learning.workload.Workload.train_many`), then each job's :meth:`finish_update`, in job order;
        or None when they cannot be: a job without :meth:`local_training`, trainings of different shapes (width,
        step count, round, masked or not), fewer than two jobs, or a model or settings the trainer cannot
        vectorise. Which jobs are offered together is decided by :func:`edgefl.training.learner.training_groups`."""
        reqs = [self.local_training(job, trainer=trainer) for job in jobs]
        if len(jobs) < 2 or not vectorisable(self) or any(r is None for r in reqs):
            return None
        first = reqs[0]
        if any(r.key(job) != first.key(jobs[0]) for r, job in zip(reqs, jobs)):
            return None
        starts = first.start if all(r.start is first.start for r in reqs) else [r.start for r in reqs]
        masks = None
        if first.class_mask is not None:
            import torch

            masks = torch.stack([r.class_mask for r in reqs])
        devices = np.array([job.device for job in jobs], dtype=np.int64)
        results = trainer.train_many(
            devices, starts, round_index=jobs[0].round_index, width=first.width, steps=first.steps, class_masks=masks,
        )  # fmt: skip
        if results is None:
            return None
        return [self.finish_update(job, res, trainer=trainer) for job, res in zip(jobs, results)]

    @abstractmethod
    def aggregate(self, state: State, *, updates: Sequence[ClientUpdate]) -> State:
        """The next global state from the updates that arrived in time (may be empty)."""

    def wire_bytes(self, update: ClientUpdate) -> bytes | None:
        """The bytes ``update.bits`` charges, as the device sent them (``output.payloads``): the payload its codec's
        oracle writer gives for a payload that holds a :class:`~edgefl.compression.coded.Coded` (``.coded``), else
        the dense float32 update (:func:`dense_bytes` of ``payload.update``); None when the payload holds neither
        (a method with its own payload overrides this)."""
        import importlib

        from edgefl.compression.coded import Coded

        coded = getattr(update.payload, "coded", None)
        if isinstance(coded, Coded):
            return importlib.import_module(coded.codec).to_bytes(coded)
        tensors = getattr(update.payload, "update", None)
        return dense_bytes(tensors) if isinstance(tensors, dict) else None

    def evaluate(self, state: State) -> tuple[float, float]:
        """(test accuracy in [0, 1], mean test loss) of the global model; a method with its own inference
        rule (HeteroFL's static batch norm) overrides this."""
        return self.workload.evaluate(state)

    def learning_gain(self, jobs: JobTable, *, n_selected: int) -> float:
        """The round's global learning gain (AnycostFL Definition 3) over the kept ``jobs``; NaN (empty in
        ``rounds.csv``) for a method without (alpha, beta)."""
        return math.nan

    def device_values(self, jobs: JobTable, *, updates: Sequence[ClientUpdate | None]) -> dict[str, np.ndarray]:
        """Values of :attr:`device_columns` for each job (shape (m,) each); ``updates[i]`` is job i's update,
        None under surrogate learning. Skipped devices get NaN."""
        return {}

    def state_dict(self) -> dict:
        """What the method remembers between rounds, for checkpoints; none by default.

        Nested dicts/lists of tensors, numbers and strings (saved with ``torch.save`` and read back with
        ``weights_only=True``); JSON-able data only in surrogate runs.
        """
        return {}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` when a run resumes."""
        if state:
            raise ValueError(f"method {self.name!r} keeps no state between rounds, got keys {sorted(state)}")
