"""The sections of a scenario: pydantic models of ``[data]``, ``[model]``, ``[train]``, ``[round]``, ``[fleet]``,
``[channel]`` and ``[surrogate]`` (the ``[method]`` section and the whole :class:`~edgefl.scenario.loading.Scenario`,
which check the methods' own tables, are in :mod:`edgefl.scenario.loading`, which re-exports these).

Physical quantities are SI with a unit suffix (``_hz``, ``_w``, ``_m``, ``_s``, ``_j``). Scenario files may also
use the units engineers use (``bandwidth_mhz``, ``tx_power_dbm``, ``noise_psd_dbm_per_mhz``, ``f_max_ghz``);
they are converted once, here, at load, and the resolved scenario written next to the results is all SI.

A quantity that differs between devices is either a number (every device the same) or ``[low, high]``
(each device draws uniformly from that range with the fleet's seeded stream).

Every physical field carries its allowed range and the physical ground of its ends, a :class:`edgefl.scenario.limits.Limit`
in its type (the ``_CPU_HZ``, ``_UE_TX_W``, ... constants below); it is checked at load in the key and unit the
user wrote, before the conversion to SI.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import Field, PrivateAttr, field_validator, model_serializer, model_validator

from edgefl.scenario.limits import Limit, check_limits, require
from edgefl.scenario.section_base import Strict as _Strict
from edgefl.scenario.section_base import check_range

__all__ = [
    "DataConfig", "ModelConfig", "ModelName", "TrainConfig", "RoundConfig", "FleetConfig", "BudgetConfig",
    "StepCostsConfig", "AvailabilityConfig", "ChannelConfig", "DownlinkConfig", "PacketErrorsConfig", "SurrogateConfig",
    "UNIT_ALIASES",
    "MAX_DEVICE_ENERGY_J", "OutputConfig",
]  # fmt: skip

PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Range = tuple[PositiveFloat, PositiveFloat]


def _convert(data: Any, table: dict[str, tuple[str, Any]]) -> Any:
    """Replace engineer-unit keys by their SI key (``{"bandwidth_mhz": 1}`` -> ``{"bandwidth_hz": 1e6}``)."""
    if not isinstance(data, dict):
        return data
    data = dict(data)
    for key, (si_key, fn) in table.items():
        if key in data:
            if si_key in data:
                raise ValueError(f"give either {key} or {si_key}, not both")
            value = data.pop(key)
            try:
                data[si_key] = [fn(float(v)) for v in value] if isinstance(value, list) else fn(float(value))
            except (TypeError, ValueError):
                raise ValueError(f"{key}={value!r}: must be a number or [low, high]") from None
    return data


# engineer-unit key -> (SI key, conversion); applied once at load
FLEET_UNITS: dict[str, tuple[str, Any]] = {}
CHANNEL_UNITS: dict[str, tuple[str, Any]] = {}


def _dbm_to_w(dbm: float) -> float:
    return 10.0 ** ((dbm - 30.0) / 10.0)  # dBm -> W: P[W] = 10^((P[dBm] - 30)/10)


def _dbm_per_mhz_to_w_per_hz(dbm_per_mhz: float) -> float:
    return _dbm_to_w(dbm_per_mhz) / 1e6  # per MHz -> per Hz


FLEET_UNITS.update(
    f_min_ghz=("f_min_hz", lambda v: v * 1e9),
    f_max_ghz=("f_max_hz", lambda v: v * 1e9),
    tx_power_dbm=("tx_power_w", _dbm_to_w),
)
CHANNEL_UNITS.update(
    bandwidth_mhz=("bandwidth_hz", lambda v: v * 1e6),
    noise_psd_dbm_per_mhz=("noise_psd_w_per_hz", _dbm_per_mhz_to_w_per_hz),
    carrier_ghz=("carrier_hz", lambda v: v * 1e9),
)
UNIT_ALIASES = {section: {k: si for k, (si, _) in table.items()} for section, table in
                 (("fleet", FLEET_UNITS), ("channel", CHANNEL_UNITS))}  # fmt: skip

# Physically possible values (edgefl.scenario.limits): each range with the real devices, cells or standards at its ends.
_YEAR_S = 365.25 * 86_400.0
MAX_DEVICE_ENERGY_J = 3.6e8
"""Most energy any edge device holds [J]: 100 kWh, an electric vehicle's battery (budgets, batteries, step costs)."""
_CPU_HZ = Limit(1e6, 10e9, "Hz", "CPU clocks run from ~1 MHz (the slowest microcontrollers) to below 10 GHz (no "
                "core exceeds ~6 GHz stock; the overclocking record is ~9 GHz)")  # fmt: skip
_ENERGY_COEFF = Limit(1e-31, 1e-24, "J/(cycle Hz^2)", "the CPU power it implies, P = eps f^3, is 0.1 mW to 1 kW "
                      "at 1 GHz; AnycostFL's eps = 1e-26 at 2 GHz (80 W) is inside")  # fmt: skip
_FLOPS_PER_CYCLE = Limit(1e-3, 1e6, "FLOP/cycle", "from software floating point on a microcontroller (~1000 "
                         "cycles per FLOP) to a data-centre GPU's tensor cores (~5e5 FLOP per cycle)")  # fmt: skip
_UE_TX_W = Limit(1e-8, _dbm_to_w(33.0), "W", "a device transmits at most 33 dBm (2 W, GSM power class 4, the "
                 "highest handheld class; 3GPP NR UEs: 23-31 dBm) and at least -50 dBm (below NB-IoT's "
                 "-40 dBm)")  # fmt: skip
MAX_CPU_POWER_W = 1000.0
"""Ceiling on the CPU power eps f_max^3 a fleet implies [W]: above any single processor package (a data-centre
GPU draws ~700 W); AnycostFL's paper values (eps up to 1e-26 at 2 GHz: 80 W) are below it."""
_SECONDS = Limit(0.0, _YEAR_S, "s", "a time above a year (3.16e7 s) is beyond any training campaign",
                 low_open=True)  # fmt: skip
_DEVICE_J = Limit(0.0, MAX_DEVICE_ENERGY_J, "J", "at most 3.6e8 J (100 kWh, an electric vehicle's battery, the "
                  "largest an edge device carries)", low_open=True)  # fmt: skip


class _Physical(_Strict):
    """A section whose physical fields carry a :class:`~edgefl.scenario.limits.Limit`, checked as written before validation
    (a section with engineer-unit keys checks them in its own unit conversion instead)."""

    @model_validator(mode="before")
    @classmethod
    def _limits(cls, data: Any) -> Any:
        return check_limits(cls, data)


class DataConfig(_Strict):
    """Dataset and its split over devices.

    Datasets: ``digits`` (scikit-learn, embedded), ``synthetic`` (FedProx's Synthetic(alpha, beta), per device),
    ``fmnist`` (Debian's dataset-fashion-mnist, or the data dir), ``mnist`` and ``cifar10`` (files in the data
    dir). The data dir is ``data_dir``, else ``$EDGEFL_DATA``; nothing is ever downloaded. Image datasets use
    their official test split (``test_fraction`` applies to digits and synthetic) and, with ``normalize``,
    per-channel standardisation by the training set's mean and std.

    Partitions: ``iid``; ``shards`` (exactly ``classes_per_device`` classes each); ``dirichlet``
    (Dir(``dirichlet_alpha``) per class); ``gamma_mix`` (CC-FedAvg: an IID share ``gamma`` of each device's data,
    the rest label-sorted, or ``classes_per_device`` shards when ``gamma_shards``); ``power_law`` (Luo setup 3:
    unbalanced sizes of mean ``mean_size`` (default all samples / N) and std ``std_size`` (default 362/245 of
    the mean)).
    """

    dataset: Literal["digits", "synthetic", "fmnist", "mnist", "cifar10"] = "digits"
    data_dir: str | None = None
    normalize: bool = True
    partition: Literal["iid", "shards", "dirichlet", "gamma_mix", "power_law"] = "iid"
    classes_per_device: int = Field(2, ge=1, le=1000)
    dirichlet_alpha: PositiveFloat = 0.5
    gamma: float = Field(0.5, ge=0, le=1)
    gamma_shards: bool = False
    mean_size: PositiveFloat | None = None
    std_size: NonNegFloat | None = None
    test_fraction: float = Field(0.2, gt=0, lt=1)
    max_train_samples: int | None = Field(None, ge=1)  # laptop scale: a random subset of the training set
    max_test_samples: int | None = Field(None, ge=1)  # and of the test set
    synthetic_alpha: NonNegFloat = 1.0
    synthetic_beta: NonNegFloat = 1.0
    synthetic_samples_mean: int = Field(245, ge=4, le=1_000_000)


ModelName = Literal[
    "mlp", "logreg", "cnn_mcmahan", "vgg9", "ccfedavg_mlp", "ccfedavg_cnn", "lenet5", "heterofl_conv", "preresnet18",
    "heterofl_mcmahan",
]
"""Names of edgefl.learning.models' registry (a test keeps the two lists equal; this module imports no torch)."""


_TAKES_HIDDEN = ("mlp", "heterofl_conv", "preresnet18", "heterofl_mcmahan")


class ModelConfig(_Strict):
    """Model architecture by registry name (``edgefl models`` lists them with sizes and FLOPs).

    ``hidden`` sets the hidden layer sizes of ``mlp`` (default (64,)) and the channels of ``heterofl_conv`` and
    ``preresnet18`` (default [64, 128, 256, 512]); other models have their papers' fixed architecture. ``width`` in (0, 1] keeps ``ceil(width * units)`` of every hidden layer.
    """

    name: ModelName = "mlp"
    hidden: tuple[Annotated[int, Field(ge=1, le=65536)], ...] | None = None
    width: float = Field(1.0, gt=0, le=1)
    init: Literal["default", "zeros"] = "default"  # zeros: w_0 = 0, as Luo et al.'s Algorithm 1

    @model_validator(mode="after")
    def _hidden_only_for_mlp(self) -> ModelConfig:
        if self.hidden is not None and self.name not in _TAKES_HIDDEN:
            raise ValueError(
                f"hidden={list(self.hidden)}: only models {', '.join(_TAKES_HIDDEN)} take hidden sizes, not {self.name!r}"
            )
        return self


class TrainConfig(_Strict):
    """Local training shared by every method: SGD on the device's data."""

    local_epochs: int = Field(1, ge=1, le=10_000)
    local_steps: int = Field(0, ge=0, le=10_000_000)  # > 0: fixed number of SGD steps instead of epochs
    batch_size: int = Field(32, ge=1, le=1_000_000)
    lr: PositiveFloat = 0.05
    momentum: float = Field(0.0, ge=0, lt=1)
    weight_decay: NonNegFloat = 0.0
    grad_clip: NonNegFloat = 0.0  # 0 = no clipping
    # the learning rate of round r = 1, 2, ...: "constant" = lr; "inverse_round" = lr / r (Luo Alg. 1);
    # "step" = lr * lr_factor ** (number of lr_milestones m < r), HeteroFL Table 6's decay schedule (x0.1 at
    # milestones given in rounds; PyTorch MultiStepLR stepped once per round: milestone 100 = rounds 101.. decay)
    lr_schedule: Literal["constant", "inverse_round", "step"] = "constant"
    lr_milestones: tuple[int, ...] = ()  # [rounds], strictly increasing, used by lr_schedule = "step"
    lr_factor: float = Field(0.1, gt=0, le=1)  # multiplies the lr at each milestone (HeteroFL: 0.1)
    eval_every: int = Field(1, ge=1, le=1_000_000)
    global_loss: bool = False  # also record the global model's loss on all devices' training data
    # a test accuracy in (0, 1]: summary.json gives the round, simulated time [s] and energy [J] that first reach it
    target_accuracy: float | None = Field(None, gt=0, le=1, allow_inf_nan=False)
    threads: int = Field(1, ge=1, le=1024)  # torch intra-op threads of `edgefl run` (docs/performance.md, "Threads")
    # where a round's training jobs run (docs/executors.md): "inline" in this process, "processes" a local pool of
    # `workers` processes, "ray" `workers` Ray actors on the cluster at `address` (None: a local one); each job
    # with `threads` torch threads. The tables are the same whichever runs them.
    executor: Literal["inline", "processes", "ray"] = "inline"
    workers: int | None = Field(None, ge=1, le=65_536)  # None: the usable cores (processes) or 2 (ray, local)
    address: str | None = None  # "HOST:PORT" or "auto" of a running Ray cluster
    # where the data, the models and their training live (docs/executors.md, "GPU"): "cpu", "cuda" (a CUDA GPU torch sees),
    # or "auto" (CUDA when torch sees one, else the CPU); the codecs, the aggregation and the tables stay on the CPU
    device: Literal["cpu", "cuda", "auto"] = "cpu"
    # train a round's jobs of one (sub)model shape together with torch.func.vmap (docs/executors.md, "Vectorised training"):
    # "auto" FedAvg's fixed-step jobs on a model measured faster so on the CPU (registry flag) and every group on a
    # GPU, "on" every group the model allows (no batch norm, buffers, dropout or clipping), "off" one by one; the
    # same for every executor
    vectorise: Literal["auto", "on", "off"] = "auto"

    @model_validator(mode="after")
    def _milestones(self) -> TrainConfig:
        ms = list(self.lr_milestones)
        if any(m < 1 for m in ms) or any(b <= a for a, b in zip(ms, ms[1:])):
            raise ValueError(f"lr_milestones={ms}: must be strictly increasing round numbers >= 1")
        require(self, key="lr_schedule", value="step", field="lr_milestones", what="lr_milestones (rounds), e.g. [100]")
        if ms and self.lr_schedule != "step":
            raise ValueError(f"lr_milestones={ms}: only used by lr_schedule='step', not {self.lr_schedule!r}")
        if self.workers is not None and self.executor == "inline":
            raise ValueError(f"workers={self.workers}: only used by executor='processes' or 'ray', not 'inline'")
        if self.address is not None and self.executor != "ray":
            raise ValueError(f"address={self.address!r}: only used by executor='ray', not {self.executor!r}")
        return self


class RoundConfig(_Physical):
    """How a round ends.

    ``wait_all``: the straggler sets the round time. ``deadline``: updates arriving after ``deadline_s``
    (measured from the round start, downlink included) are dropped, their energy still charged.
    ``over_select``: ``ceil(K * (1 + over_select_fraction))`` devices start, the first K arrivals are kept.
    ``late``: what a device does once the server stops waiting for it (``deadline``, ``over_select``):
    ``"finish"`` its work (energy charged in full; busy, so not selectable, until it ends) or ``"cancel"`` it
    at the cut-off (energy charged pro rata of the compute and upload time done), see :mod:`edgefl.engine.clock`.
    ``downlink_s``: a download time [s] common to every device, used unless ``[channel.downlink]`` is given.
    ``charge_idle``: charge a device's static (idle) power while it waits inside a round, between the end of its
    download and the start of its upload when it is not computing (a TDMA slot); off in the papers' model.
    """

    policy: Literal["wait_all", "deadline", "over_select"] = "wait_all"
    late: Literal["finish", "cancel"] = "finish"
    deadline_s: Annotated[PositiveFloat | None, Limit(1e-9, _YEAR_S, "s", "from 1 ns (a CPU cycle) to a year")] = None
    over_select_fraction: float = Field(0.3, gt=0, le=10)
    downlink_s: Annotated[NonNegFloat, Limit(0.0, _YEAR_S, "s", "a download takes 0 s to at most a year")] = 0.0
    charge_idle: bool = False

    @model_validator(mode="after")
    def _deadline_given(self) -> RoundConfig:
        return require(self, key="policy", value="deadline", field="deadline_s", what="deadline_s > 0 [s]")


class BudgetConfig(_Physical):
    """Per-round energy budget E_max [J]: none, fixed per device, or drawn each round from U[low, high]."""

    kind: Literal["none", "fixed", "uniform"] = "none"
    value_j: Annotated[float | Range, _DEVICE_J] = Field(default=1.0)
    low_j: Annotated[PositiveFloat, _DEVICE_J] = 1.0
    high_j: Annotated[PositiveFloat, _DEVICE_J] = 1.0

    @field_validator("value_j")
    @classmethod
    def _v(cls, v: float | tuple[float, float]) -> float | tuple[float, float]:
        if not isinstance(v, tuple) and not (v > 0 and math.isfinite(v)):
            raise ValueError("must be > 0 [J]")
        return check_range(v)

    @model_validator(mode="after")
    def _order(self) -> BudgetConfig:
        if self.low_j > self.high_j:
            raise ValueError(f"low_j={self.low_j} > high_j={self.high_j}: need low_j <= high_j")
        return self


class StepCostsConfig(_Physical):
    """Per-device costs given directly instead of derived from FLOPs, frequency and the radio (Luo et al.
    Sec. VI-A simulation setups): one local SGD step takes ``step_time_s`` [s] and ``step_energy_j`` [J], one
    round of communication ``comm_time_s`` [s] and ``comm_energy_j`` [J]. ``kind = "normal"``: each device
    draws each once from N(mean, (std_ratio * mean)^2), clipped below at 1% of the mean (no cost <= 0).
    ``kind = "lognormal"``: each from a lognormal of that mean and standard deviation ``std_ratio * mean``
    (log-space sigma^2 = ln(1 + std_ratio^2), mu = ln(mean) - sigma^2 / 2), a heavy right tail: a few devices
    far slower than the rest, as in FedScale's device compute traces (std_ratio = 1.5: sigma = 1.09, 3.4% of
    devices above 4x the mean).
    """

    kind: Literal["none", "normal", "lognormal"] = "none"
    step_time_s: Annotated[PositiveFloat, _SECONDS] = 0.1
    comm_time_s: Annotated[PositiveFloat, _SECONDS] = 2.0
    step_energy_j: Annotated[PositiveFloat, _DEVICE_J] = 1e-3
    comm_energy_j: Annotated[PositiveFloat, _DEVICE_J] = 2e-2
    std_ratio: NonNegFloat = 1 / 3


_Hour = Annotated[float, Field(ge=0, le=24, allow_inf_nan=False)]
Hours = tuple[_Hour, _Hour]


class AvailabilityConfig(_Physical):
    """When devices are online (:mod:`edgefl.fleet.availability`); the server selects among online, idle devices.

    ``kind = "always"``: every device always online. ``"markov"``: exponential online and offline periods of
    means ``online_mean_s`` and ``offline_mean_s`` [s] (each a number or [low, high] drawn per device).
    ``"diurnal"``: a daily window (charging) starting ``window_start_h`` hours after midnight, in [0, 24), lasting
    ``window_length_h`` hours, in (0, 24] (each a number or [low, high] drawn per device). ``"trace"``: online
    intervals from the CSV file ``trace_path`` (header ``device,online_s,offline_s``).
    """

    kind: Literal["always", "markov", "diurnal", "trace"] = "always"
    online_mean_s: Annotated[PositiveFloat | Range, _SECONDS] = 3600.0
    offline_mean_s: Annotated[PositiveFloat | Range, _SECONDS] = 3600.0
    window_start_h: Annotated[float, Field(ge=0, lt=24, allow_inf_nan=False)] | Hours = (0.0, 23.0)
    window_length_h: Annotated[float, Field(gt=0, le=24, allow_inf_nan=False)] | Hours = (2.0, 8.0)
    trace_path: str | None = None

    @field_validator("online_mean_s", "offline_mean_s", "window_start_h", "window_length_h")
    @classmethod
    def _ranges(cls, v: float | tuple[float, float]) -> float | tuple[float, float]:
        return check_range(v)

    @model_validator(mode="after")
    def _kind_needs(self) -> AvailabilityConfig:
        if self.kind == "trace" and not self.trace_path:
            raise ValueError("kind='trace' needs trace_path, a CSV file of device,online_s,offline_s rows")
        if isinstance(self.window_length_h, tuple) and self.window_length_h[0] <= 0:
            raise ValueError(f"window_length_h={list(self.window_length_h)}: lengths must be in (0, 24] [h]")
        if isinstance(self.window_start_h, tuple) and self.window_start_h[1] >= 24:
            raise ValueError(f"window_start_h={list(self.window_start_h)}: starts must be in [0, 24) [h]")
        return self


FLEET_FIELDS = ("f_min_hz", "f_max_hz", "energy_coeff", "flops_per_cycle", "tx_power_w")
"""The per-device quantities a catalogue profile sets (the catalogue's names are the fleet's)."""
POWER_FIELDS = ("static_power_w", "tx_circuit_power_w", "pa_efficiency")
"""The parts of a device's power the realistic physics adds (``physics = "realistic"``), set by a profile there
and by the scenario's own keys or a device table's columns under either physics; the receive power of downloads,
``rx_power_w``, is the fourth part (a profile's, or ``[channel.downlink]``'s for every device)."""
_STATIC_W = Limit(0.0, 100.0, "W", "a device's idle draw: from 0 (the papers' model) to 100 W (above any edge "
                  "board or phone at rest)")  # fmt: skip
_CIRCUIT_W = Limit(0.0, 10.0, "W", "a radio's circuit power while it transmits: from 0 (the papers' model) to "
                   "10 W (above any handset or USB modem)")  # fmt: skip
_PA_EFF = Limit(0.01, 1.0, "", "a power amplifier turns at most all (1, the papers' model) and at least 1% of its "
                "supply into radiated power; handset PAs reach about 0.3-0.5")  # fmt: skip
_RX_W = Limit(0.0, 10.0, "W", "a device's receive chain draws well under 10 W")


class FleetConfig(_Strict):
    """Device population. Each quantity: a number, or [low, high] drawn per device (uniform)."""

    n_devices: int = Field(20, ge=1, le=10_000_000)
    f_min_hz: Annotated[PositiveFloat | Range, _CPU_HZ] = 0.1e9
    f_max_hz: Annotated[PositiveFloat | Range, _CPU_HZ] = 1.0e9
    energy_coeff: Annotated[PositiveFloat | Range, _ENERGY_COEFF] = 1e-28  # eps [J/(cycle*Hz^2)], AnycostFL eq. (7)
    flops_per_cycle: Annotated[PositiveFloat | Range, _FLOPS_PER_CYCLE] = 8.0
    # Laptop scale with the paper's costs: devices hold this fraction s of the paper's samples per device, and
    # their FLOPs per cycle are multiplied by s, so a device-round's cycles, compute time and energy are the
    # paper-scale ones (uploads keep the real model's size). 1 = no scaling. The run report states it.
    flops_per_cycle_scale: float = Field(1.0, gt=0, le=1)
    tx_power_w: Annotated[PositiveFloat | Range, _UE_TX_W] = 0.1
    # the parts of the device's power (issue #33): static (idle) power drawn while computing, on top of eps f^3;
    # the radio's circuit power and the PA's efficiency while uploading (upload power = circuit + tx / PA
    # efficiency). The defaults are the papers' model; under physics = "realistic" a profile sets them, and a
    # device without a profile takes edgefl.scenario.physics.REALISTIC_PROFILE's.
    static_power_w: Annotated[NonNegFloat | Range, _STATIC_W] = 0.0
    tx_circuit_power_w: Annotated[NonNegFloat | Range, _CIRCUIT_W] = 0.0
    pa_efficiency: Annotated[PositiveFloat | Range, _PA_EFF] = 1.0
    budget: BudgetConfig = BudgetConfig()
    step_costs: StepCostsConfig = StepCostsConfig()
    availability: AvailabilityConfig = AvailabilityConfig()
    # a device table (CSV or Parquet path, relative to the scenario file) and a catalogue profile mix
    # {name = weight}: see edgefl.scenario.device_table and edgefl.fleet.build
    devices: str | None = None
    profiles: dict[str, PositiveFloat] | None = None
    # refuse a device table in which some rows give a position and others leave it empty (else: a warning)
    devices_strict: bool = False
    # the DataFrame's device table that ``devices = "dataframe:<digest>"`` names: held by this section (copied and
    # pickled with it), never dumped; see edgefl.scenario.device_table.frame_table
    _table: Any = PrivateAttr(default=None)

    @model_validator(mode="before")
    @classmethod
    def _units(cls, data: Any) -> Any:
        return _convert(check_limits(cls, data, FLEET_UNITS), FLEET_UNITS)

    def hold_table(self, table: Any) -> None:
        """Hold ``table``, the DataFrame's device table ``devices`` names, for as long as this section lives."""
        self._table = table

    @property
    def held_table(self) -> Any:
        """The DataFrame's device table this section holds, or None (no table, or a file's)."""
        return self._table

    @field_validator("f_min_hz", "f_max_hz", "energy_coeff", "flops_per_cycle", "tx_power_w", "static_power_w",
                     "tx_circuit_power_w", "pa_efficiency")
    @classmethod
    def _ranges(cls, v: float | tuple[float, float]) -> float | tuple[float, float]:
        return check_range(v)

    @model_serializer(mode="wrap")
    def _dump(self, handler: Any) -> Any:
        """The resolved fleet, less the profile quantities left at their defaults when a profile mix sets them and
        the power parts left at theirs: loading the dump again gives the same :meth:`explicit_fields` and
        :meth:`explicit_power_fields`, hence the same fleet."""
        dumped = handler(self)
        if not isinstance(dumped, dict):
            return dumped
        unset = set(POWER_FIELDS) - self.explicit_power_fields()  # a profile's (realistic physics) unless set
        if self.profiles:
            unset |= set(FLEET_FIELDS) - self.explicit_fields()
        return {k: v for k, v in dumped.items() if k not in unset}

    def explicit_power_fields(self) -> set[str]:
        """The power parts (:data:`POWER_FIELDS`) the scenario sets itself: these hold for every device, over a
        profile's and over the realistic defaults."""
        return set(POWER_FIELDS) & self.model_fields_set

    def explicit_fields(self) -> set[str]:
        """The profile quantities (:data:`edgefl.scenario.catalogue.FLEET_FIELDS`) the scenario sets itself, in its file or
        with ``--set``, in SI or engineer units: these keep the scenario's value on a device whose profile the
        ``fleet.profiles`` mix drew."""
        return set(FLEET_FIELDS) & self.model_fields_set

    @model_validator(mode="after")
    def _freq_order(self) -> FleetConfig:
        lo = self.f_min_hz[1] if isinstance(self.f_min_hz, tuple) else self.f_min_hz
        hi = self.f_max_hz[0] if isinstance(self.f_max_hz, tuple) else self.f_max_hz
        if lo > hi:
            raise ValueError(f"f_min (up to {lo / 1e9:g} GHz) exceeds f_max (from {hi / 1e9:g} GHz): need f_min <= f_max")
        return self

    @model_validator(mode="after")
    def _cpu_power(self) -> FleetConfig:
        eps = self.energy_coeff[1] if isinstance(self.energy_coeff, tuple) else self.energy_coeff
        f = self.f_max_hz[1] if isinstance(self.f_max_hz, tuple) else self.f_max_hz
        if eps * f**3 > MAX_CPU_POWER_W:  # CPU power at f_max, P = eps f^3 (AnycostFL eq. (7) per second)
            raise ValueError(
                f"energy_coeff up to {eps:g} with f_max up to {f / 1e9:g} GHz: the CPU power eps f_max^3 = "
                f"{eps * f**3:.3g} W exceeds {MAX_CPU_POWER_W:g} W, more than any device's processor draws"
            )
        return self


_BS_TX_W = Limit(_dbm_to_w(0.0), _dbm_to_w(60.0), "W", "a base station transmits from 0 dBm (a femto cell at its "
                 "lowest) to 60 dBm (1 kW, above a macro cell's 43-49 dBm per carrier)")  # fmt: skip
_BANDWIDTH_HZ = Limit(1e3, 2.16e9, "Hz", "from 1 kHz (below an NB-IoT subcarrier, 3.75 kHz) to 2.16 GHz (an IEEE "
                      "802.11ad channel, the widest any standard radio uses)")  # fmt: skip
DOWNLINK_UNITS: dict[str, tuple[str, Any]] = {
    "bandwidth_mhz": ("bandwidth_hz", lambda v: v * 1e6),
    "tx_power_dbm": ("tx_power_w", _dbm_to_w),
    "rx_power_dbm": ("rx_power_w", _dbm_to_w),
}


class DownlinkConfig(_Strict):
    """``[channel.downlink]``: each device downloads the global model (a submodel's bits for width-shrinking
    methods) over its own downlink, ``t_down = bits / r_down`` with ``r_down = b log2(1 + g P_bs / (N0 b))``:
    the uplink's path loss, shadowing and fading g and noise N0, the base station's transmit power
    ``tx_power_w`` [W] (or ``tx_power_dbm``) and a sub-band ``bandwidth_hz`` [Hz] (or ``bandwidth_mhz``) per
    device (``bandwidth_mode = "fixed"``) or shared by the round's downloading devices (``"split"``).
    ``rx_power_w`` [W] (or ``rx_power_dbm``): every device's receive power, charging ``e_down = P_rx t_down``
    (0: downloads cost no energy); under ``physics = "realistic"``, left out, each device's own (its profile's). Without this table every device downloads in ``round.downlink_s``.
    """

    tx_power_w: Annotated[PositiveFloat, _BS_TX_W] = 10.0 ** ((46.0 - 30.0) / 10.0)  # 46 dBm: a macro base station
    bandwidth_hz: Annotated[PositiveFloat, _BANDWIDTH_HZ] = 1e6
    bandwidth_mode: Literal["fixed", "split"] = "fixed"
    rx_power_w: Annotated[NonNegFloat, _RX_W] = 0.0

    @model_validator(mode="before")
    @classmethod
    def _units(cls, data: Any) -> Any:
        return _convert(check_limits(cls, data, DOWNLINK_UNITS), DOWNLINK_UNITS)

    @model_serializer(mode="wrap")
    def _dump(self, handler: Any) -> Any:
        """The section, less ``rx_power_w`` when the scenario left it out: set, it holds for every device over
        their profiles' (realistic physics), so loading the dump again must leave it out too."""
        dumped = handler(self)
        if isinstance(dumped, dict) and "rx_power_w" not in self.model_fields_set:
            dumped.pop("rx_power_w", None)
        return dumped


_EXPONENT = Limit(1.0, 8.0, "", "measured path-loss exponents run from 1.6 (corridors) to 6 (dense buildings)")
_REF_M = Limit(1e-3, 1e4, "m", "a log-distance fit's reference distance, from 1 mm (mmWave near field) to 10 km "
               "(inside the largest cells)")  # fmt: skip
_REF_LOSS_DB = Limit(0.0, 200.0, "dB", "a loss at the reference distance between 0 and 200 dB")
_CARRIER_HZ = Limit(1e6, 300e9, "Hz", "from 1 MHz (below any cellular or WLAN band) to 300 GHz (the top of the "
                    "radio spectrum, ITU)")  # fmt: skip
_IOT_DB = Limit(0.0, 30.0, "dB", "uplink interference over thermal: 0 dB in an isolated cell, a few dB in loaded "
                "macro networks' link budgets, rarely above 10 dB")  # fmt: skip
_ALLOC_WEIGHT = Limit(0.0, 1.0, "", "the weight of time in Yang et al.'s weighted objective w T + (1 - w) E: w = 1 "
                      "is the least round time, w -> 0 lets the round grow without bound", low_open=True)  # fmt: skip
_SHADOWING_DB = Limit(0.0, 20.0, "dB", "measured log-normal shadowing has a std of 4-12 dB")
_NOISE_PSD = Limit(_dbm_per_mhz_to_w_per_hz(-124.0), _dbm_per_mhz_to_w_per_hz(-54.0), "W/Hz", "thermal noise at "
                   "290 K is -114 dBm/MHz; from 10 dB below it (a cooled receiver) to 60 dB above (noise figure and "
                   "interference no usable cell has)")  # fmt: skip
_CELL_M = Limit(1.0, 1e5, "m", "from 1 m (a room) to 100 km (LTE's extended-range cells, the largest)")
_WALK_M = Limit(0.0, 1e5, "m", "a device moves at most 100 km (an hour at motorway speed) between rounds",
                low_open=True)  # fmt: skip


_WATERFALL = Limit(1e-9, 1e9, "", "the waterfall threshold m is an SINR [linear]: from -90 dB (no upload is ever "
                   "lost) to +90 dB (every upload is); Chen et al. quote 0.023 dB (1.0053), their code 1.08")  # fmt: skip


class PacketErrorsConfig(_Physical):
    """``[channel.packet_errors]``: each upload is lost with Chen et al.'s packet error rate (2021, eq. (9) on the
    round's channel) ``q = 1 - exp(-m (I + B N0) / (P h))`` = ``1 - exp(-m / SINR)``, with the SINR of the band it
    uploads on (its FDMA sub-band, or the whole band under TDMA; the interference I is
    ``channel.interference_db``'s rise over the noise). ``waterfall``: m [linear, an SINR], from 1e-9 to 1e9;
    ``retransmissions``: how many times a lost upload is sent again at once (0 to 100, default 0), each attempt
    charged its time and energy. Draws come from each device's own stream (``packet_errors``, round, device)."""

    waterfall: Annotated[PositiveFloat, _WATERFALL] = 1.08
    retransmissions: int = Field(0, ge=0, le=100)


class ChannelConfig(_Strict):
    """Uplink radio: path loss, fading, FDMA sub-bands or TDMA (``access``), placement and mobility; ``downlink``
    (optional): the per-device downlink, :class:`DownlinkConfig`; ``packet_errors`` (optional): uploads lost to
    packet errors, :class:`PacketErrorsConfig`. ``link_model``: the rate a link gets at its SINR, on the uplink
    and the downlink alike (:mod:`channel.link_models`): ``"shannon"`` (``b log2(1 + SINR)``, the papers' bound,
    no cap) or ``"truncated_shannon"`` (3GPP TR 36.942 Annex A.2: 0 below -10 dB, ``alpha log2(1 + SINR)``
    above, at most ``Thr_max``; uplink alpha 0.4 and Thr_max 2.0 bit/s/Hz, downlink 0.6 and 4.4)."""

    pathloss: Literal["3gpp_macro", "log_distance", "free_space"] = "3gpp_macro"
    exponent: Annotated[PositiveFloat, _EXPONENT] = 3.76  # log_distance only
    ref_distance_m: Annotated[PositiveFloat, _REF_M] = 1.0  # log_distance only
    ref_loss_db: Annotated[float, Field(allow_inf_nan=False), _REF_LOSS_DB] = 30.0  # log_distance only
    carrier_hz: Annotated[PositiveFloat, _CARRIER_HZ] = 2.4e9  # free_space only
    shadowing_db: Annotated[NonNegFloat, _SHADOWING_DB] = 0.0  # log-normal shadowing std [dB]; 0 = off
    rayleigh: bool = False  # Rayleigh block fading, one draw per device per round
    noise_psd_w_per_hz: Annotated[PositiveFloat, _NOISE_PSD] = _dbm_per_mhz_to_w_per_hz(-114.0)
    bandwidth_hz: Annotated[PositiveFloat, _BANDWIDTH_HZ] = 1e6
    bandwidth_mode: Literal["fixed", "split"] = "fixed"
    cell_radius_m: Annotated[PositiveFloat, _CELL_M] = 550.0
    min_distance_m: Annotated[NonNegFloat, Limit(0.0, 1e5, "m", "inside the largest cell (100 km)")] = 10.0
    mobility: Literal["static", "redraw", "random_walk"] = "static"
    walk_step_m: Annotated[PositiveFloat, _WALK_M] = 10.0
    downlink: DownlinkConfig | None = None
    link_model: Literal["shannon", "truncated_shannon"] = "shannon"
    # inter-cell interference as a rise over thermal noise [dB] (IoT): the noise PSD both links see is
    # N0 10^(interference_db / 10); 0 = an isolated cell (the papers' model)
    interference_db: Annotated[NonNegFloat, _IOT_DB] = 0.0
    # how the uplink is shared: "fdma" (each device on its sub-band, bandwidth_mode) or "tdma" (one upload at a
    # time on the whole bandwidth_hz, in the order devices finish computing)
    access: Literal["fdma", "tdma"] = "fdma"
    packet_errors: PacketErrorsConfig | None = None
    # how each round shares the uplink among the devices it starts (edgefl.fleet.allocation): "equal" (the
    # band as bandwidth_mode says, every device at its own tx power), "min_time" (Shi et al.'s common finish),
    # "min_energy" (Yang et al.'s least energy under the round's deadline; without one, least
    # allocation_weight * T [s] + (1 - allocation_weight) * E [J], their weighted form)
    allocation: Literal["equal", "min_time", "min_energy"] = "equal"
    allocation_weight: Annotated[float, Field(gt=0, le=1), _ALLOC_WEIGHT] = 0.5

    @model_validator(mode="before")
    @classmethod
    def _units(cls, data: Any) -> Any:
        return _convert(check_limits(cls, data, CHANNEL_UNITS), CHANNEL_UNITS)

    @model_validator(mode="after")
    def _cell(self) -> ChannelConfig:
        if self.cell_radius_m <= self.min_distance_m:
            raise ValueError(
                f"cell_radius_m={self.cell_radius_m} must be > min_distance_m={self.min_distance_m} [m]"
            )
        return self


class SurrogateConfig(_Strict):
    """``learning = "surrogate"``: no training; the loss follows a paper's convergence bound round by round.

    ``bound = "anycostfl"``: AnycostFL Theorem 2, eqs. (18)/(45): the optimality gap contracts each round by
    Z_t = 1 - nu_over_lambda * (1 - epsilon * (1 - g_t)), with the round's global learning gain g_t (Def. 3)
    over the selected devices (a device whose update does not arrive contributes 0).
    ``bound = "luo"``: Luo et al. bound (15), gap <= (A0 + B0 (1 + (N-K)/(K(N-1))) E^2) / (E R), accumulated
    round by round with the round's arrived K and mean local steps E.
    The loss is ``loss_floor + gap`` (starting at ``initial_loss``). Workload sizes replace the model and data:
    ``samples_per_device`` (number or [low, high], drawn per device), ``train_flops_per_sample`` of the full
    model (a width-w submodel costs w^2 times that) and ``model_parameters`` (32-bit update = 32 x that).
    Defaults are McMahan's CNN on Fashion-MNIST (1,663,370 parameters) with 1,000 samples per device.
    """

    bound: Literal["anycostfl", "luo"] = "anycostfl"
    initial_loss: PositiveFloat = 2.302585  # ln(10): cross-entropy of a uniform 10-class guess
    loss_floor: NonNegFloat = 0.0
    nu_over_lambda: float = Field(0.05, gt=0, le=1)  # anycostfl: strong convexity / smoothness
    epsilon: float = Field(0.5, ge=0, le=1)  # anycostfl: compression-error constant of Assumption 4
    a0: PositiveFloat = 100.0  # luo: A0 of bound (15)
    b0: PositiveFloat = 1.0  # luo: B0 of bound (15)
    samples_per_device: PositiveFloat | Range = 1000.0
    train_flops_per_sample: PositiveFloat = 72_384_512.0  # McMahan CNN, measured (`edgefl models`)
    model_parameters: int = Field(1_663_370, ge=1, le=10**12)

    @field_validator("samples_per_device")
    @classmethod
    def _samples(cls, v: float | tuple[float, float]) -> float | tuple[float, float]:
        return check_range(v)


class OutputConfig(_Strict):
    """``[output]``: how a run's device table is written. ``format``: ``"csv"`` (``device_rounds.csv``) or
    ``"parquet"`` (``device_rounds.parquet``, for fleets of 10^5 devices and more). ``keep_checkpoint``: keep
    the run folder's ``checkpoint/`` once the run has finished (default: removed then; a run stopped early
    always keeps it, for ``edgefl run --resume``). ``payloads``: write every arrived update's encoded payload as
    ``payloads/round-R/device-D.bin`` in the run folder (docs/outputs.md)."""

    format: Literal["csv", "parquet"] = "csv"
    keep_checkpoint: bool = False
    payloads: bool = False
