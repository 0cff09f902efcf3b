"""Scenario: a validated, declarative description of one run (pydantic models loaded from TOML).

The sections (data, model, train, round, fleet, channel, surrogate, output; units converted at load) are in
:mod:`edgefl.scenario.sections` and re-exported here. This module adds the ``[method]`` section, whose tables each
method checks with its own settings model, the whole :class:`Scenario` with its cross-section checks (a method's needs
against the round policy, budget, learning and cost mode), and loading: presets, files, ``--set`` overrides and
one-line errors. The method registry is handed to validation (``methods=``); this module does not import the methods
(:mod:`edgefl.run.load` hands in the registered ones).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import tomli_w
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from edgefl.scenario.sections import (
    UNIT_ALIASES, BudgetConfig, ChannelConfig, DataConfig, FleetConfig, ModelConfig, RoundConfig, StepCostsConfig,
    OutputConfig, SurrogateConfig, TrainConfig,
)  # fmt: skip
from edgefl.errors import ScenarioError
from edgefl.scenario.device_table import checked_fleet_section, hold_frame_table
from edgefl.scenario.did_you_mean import nearest_key
from edgefl.scenario.luo_settings import LuoSettings
from edgefl.scenario.physics import Physics, with_physics_defaults
from edgefl.scenario.section_base import Strict as _Strict
from edgefl.scenario.selection_settings import SelectionConfig

__all__ = [
    "Scenario",
    "DataConfig",
    "ModelConfig",
    "TrainConfig",
    "MethodConfig",
    "cost_mode",
    "RoundConfig",
    "FleetConfig",
    "BudgetConfig",
    "StepCostsConfig",
    "ChannelConfig",
    "SurrogateConfig",
    "SelectionConfig",
    "load_scenario",
    "scenario_from_dict",
    "scenario_to_toml",
    "apply_overrides",
    "parse_override",
    "set_dotted",
    "read_toml",
    "short_repr",
]

_MOVED_METHOD_KEYS = {
    "alpha_min": "method.anycostfl.alpha_min",
    "beta_max": "method.anycostfl.beta_max",
    "cpu_policy": "method.{name}.cpu_policy",
}
"""Keys that used to sit in ``[method]`` and now live in one method's table: old key -> where it went."""


def _registry(info: ValidationInfo) -> Mapping[str, Any]:
    """The method registry handed to validation (``context={"methods": ...}``): name -> method class, each with its
    settings model (``Settings``) and needs (``needs``). The scenario does not import the methods: the caller that
    loads a scenario hands them in (:func:`edgefl.run.load.scenario_from_dict` hands in every registered method)."""
    methods = (info.context or {}).get("methods")
    if methods is None:
        raise TypeError("a Scenario is validated with the method registry: scenario_from_dict(data, methods=...)")
    return methods


def method_tables(methods: Mapping[str, Any]) -> dict[tuple[str, ...], dict[str, type[BaseModel]]]:
    """The keyed tables the registry adds to a scenario (``[method.<name>]``: each method's settings model), for
    :func:`~edgefl.scenario.did_you_mean.nearest_key`."""
    return {("method",): {name: method.Settings for name, method in methods.items()}}


def _nested(exc: ValidationError, prefix: tuple[str, ...]) -> ValidationError:
    """``exc`` with ``prefix`` in front of every error location (a table validated inside a validator)."""
    from pydantic_core import InitErrorDetails

    details = [
        InitErrorDetails(type=e["type"], loc=(*prefix, *e["loc"]), input=e.get("input"), ctx=e.get("ctx", {}))
        for e in exc.errors(include_url=False)
    ]
    return ValidationError.from_exception_data(exc.title, details)


def _key_error(key: str, value: Any, message: str) -> ValidationError:
    """A one-line error located at ``[method].key``."""
    from pydantic_core import InitErrorDetails, PydanticCustomError

    detail = InitErrorDetails(type=PydanticCustomError("method_key", message), loc=(key,), input=value)
    return ValidationError.from_exception_data("MethodConfig", [detail])


class MethodConfig(_Strict):
    """FL method and the settings tables of the methods.

    ``name`` is a method of the registry handed to validation (:func:`_registry`); each ``[method.<name>]``
    table is validated by that method's own settings model (its defaults are defined there, once), and the
    chosen method's table is filled in when absent. ``[method.luo]`` holds the settings of ``edgefl design ke``.
    """

    model_config = ConfigDict(extra="allow", frozen=True, validate_default=True)

    name: str = "fedavg"
    clients_per_round: int = Field(10, ge=1, le=10_000_000)
    luo: LuoSettings = LuoSettings()

    @model_validator(mode="before")
    @classmethod
    def _tables(cls, data: Any, info: ValidationInfo) -> Any:
        if not isinstance(data, dict):
            return data
        methods = _registry(info)
        data = dict(data)
        name = data.get("name", "fedavg")
        if isinstance(name, str) and name in methods:
            data.setdefault(name, {})
        for key in list(data):
            if key in cls.model_fields:
                continue
            if key in _MOVED_METHOD_KEYS:
                where = _MOVED_METHOD_KEYS[key].format(name=name if isinstance(name, str) else "<name>")
                raise _key_error(key, data[key], f"moved: set {where} instead")
            if key not in methods:
                near = nearest_key(("method", key), Scenario, method_tables(methods))
                hint = f"did you mean {near}? " if near else ""
                tables = ", ".join(sorted(methods))
                raise _key_error(key, data[key], f"unknown key ({hint}method tables: {tables}, luo)")
            try:
                data[key] = methods[key].Settings.model_validate(data[key])
            except ValidationError as exc:
                raise _nested(exc, (key,)) from None
        return data

    @field_validator("name")
    @classmethod
    def _registered(cls, v: str, info: ValidationInfo) -> str:
        methods = _registry(info)
        if v not in methods:
            raise ValueError(f"not implemented; available: {', '.join(sorted(methods))}")
        return v

    def settings_of(self, name: str | None = None) -> Any:
        """The settings of method ``name`` (default: the chosen one, whose table validation fills in when absent).

        Raises ``KeyError`` naming the table when the scenario has no ``[method.<name>]`` table."""
        name = self.name if name is None else name
        given = (self.model_extra or {}).get(name)
        if given is None:
            raise KeyError(f"the scenario has no [method.{name}] table")
        return given


def cost_mode(fleet: FleetConfig) -> str:
    """The cost mode a fleet section selects: ``"per_step"`` with drawn step costs, else ``"physical"``."""
    return "physical" if fleet.step_costs.kind == "none" else "per_step"


class Scenario(_Strict):
    """One run: what trains, on which devices, over which radio, with which method."""

    name: str = Field("scenario", min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.\-]+$")
    description: str = ""
    seed: int = Field(0, ge=0, le=2**63 - 1)
    rounds: int = Field(20, ge=1, le=10_000_000)
    learning: Literal["torch", "surrogate"] = "torch"
    physics: Physics = "paper"  # the papers' idealised model or the realistic one (edgefl.scenario.physics)
    checkpoint_every: int = Field(10, ge=0, le=10_000_000)  # rounds between checkpoints; 0 = never
    data: DataConfig = DataConfig()
    model: ModelConfig = ModelConfig()
    train: TrainConfig = TrainConfig()
    method: MethodConfig = Field(default_factory=dict)  # validated with the registry, like a given [method]
    round: RoundConfig = RoundConfig()
    fleet: FleetConfig = FleetConfig()
    channel: ChannelConfig = ChannelConfig()
    surrogate: SurrogateConfig = SurrogateConfig()
    output: OutputConfig = OutputConfig()
    selection: SelectionConfig = SelectionConfig()

    @model_validator(mode="before")
    @classmethod
    def _physics(cls, data: Any) -> Any:
        """Under ``physics = "realistic"``, that physics' defaults for the keys the scenario leaves out."""
        return with_physics_defaults(data)

    @model_validator(mode="before")
    @classmethod
    def _one_waterfall(cls, data: Any) -> Any:
        """Under ``selection.policy = "chen"`` with ``[channel.packet_errors]``, one waterfall m for Chen et al.'s
        planning and the loss draw: the one given of ``selection.chen.waterfall`` and
        ``channel.packet_errors.waterfall`` fills the other; both given must be equal (one line otherwise)."""
        if not isinstance(data, dict):
            return data
        sel, ch = data.get("selection"), data.get("channel")
        if not (isinstance(sel, dict) and sel.get("policy") == "chen" and isinstance(ch, dict)):
            return data
        chen, lost = sel.get("chen", {}), ch.get("packet_errors")
        if not (isinstance(chen, dict) and isinstance(lost, dict)):
            return data
        mine, theirs = chen.get("waterfall"), lost.get("waterfall")
        if mine is not None and theirs is not None and mine != theirs:
            raise ValueError(
                f"selection.chen.waterfall={mine!r} with channel.packet_errors.waterfall={theirs!r}: Chen et al.'s "
                "selection plans with the packet error rate the uploads are then lost with, so one m; give it in "
                "one of the two keys (the other takes it) or the same number in both"
            )
        m = theirs if mine is None else mine
        if m is None:
            return data
        return {**data, "selection": {**sel, "chen": {**chen, "waterfall": m}},
                "channel": {**ch, "packet_errors": {**lost, "waterfall": m}}}  # fmt: skip

    @model_validator(mode="before")
    @classmethod
    def _device_table(cls, data: Any) -> Any:
        """The ``[fleet]`` section with its device table read and checked (its rows set ``n_devices``)."""
        if isinstance(data, dict) and isinstance(data.get("fleet"), dict):
            data = {**data, "fleet": checked_fleet_section(data["fleet"])}
        return data

    @model_validator(mode="after")
    def _hold_frame(self) -> Scenario:
        """A DataFrame's device table is held by the ``[fleet]`` section naming it: it goes with the scenario."""
        hold_frame_table(self.fleet)
        return self

    @model_validator(mode="after")
    def _strict_table(self) -> Scenario:
        """``fleet.devices_strict``: a device table with positions in some rows only is refused (else the run
        warns, :func:`edgefl.run.runner.prepare`)."""
        if self.fleet.devices_strict and self.fleet.devices is not None:
            from edgefl.scenario.device_table import position_gaps, table_of

            gaps = position_gaps(table_of(self.fleet))
            if gaps is not None:
                raise ValueError(f"fleet.devices_strict = true: {gaps}; fill in their cells (or leave "
                                 "fleet.devices_strict false to place those devices at drawn positions)")  # fmt: skip
        return self

    @model_validator(mode="after")
    def _cross(self, info: ValidationInfo) -> Scenario:
        n, k = self.fleet.n_devices, self.method.clients_per_round
        if k > n:
            raise ValueError(f"method.clients_per_round={k} exceeds fleet.n_devices={n}: need 1 <= K <= N")
        name = self.method.name
        methods = _registry(info)
        needs = methods[name].needs
        if self.learning == "surrogate" and not needs.surrogate:
            able = sorted(m for m, c in methods.items() if c.needs.surrogate)
            raise ValueError(
                f"learning='surrogate' with method.name={name!r}: the surrogate replaces training for "
                f"{', '.join(able)} only (the others need a real model and data); set learning='torch'"
            )
        if needs.deadline and self.round.policy != "deadline":
            raise ValueError(
                f"method.name={name!r} with round.policy={self.round.policy!r}: {name} plans for a deadline "
                "T_max; set round.policy='deadline' and round.deadline_s"
            )
        if needs.budget and self.fleet.budget.kind == "none":
            raise ValueError(
                f"method.name={name!r} with fleet.budget.kind='none': {name} plans for a per-round energy budget "
                "E_max; set fleet.budget.kind to 'fixed' or 'uniform'"
            )
        if needs.asynchronous:
            if self.round.policy != "wait_all":
                raise ValueError(
                    f"method.name={name!r} with round.policy={self.round.policy!r}: an asynchronous method has no "
                    "rounds to cut; leave round.policy = 'wait_all'"
                )
            if self.learning == "surrogate" and self.surrogate.bound != "anycostfl":
                raise ValueError(
                    f"method.name={name!r} with surrogate.bound={self.surrogate.bound!r}: asynchronous surrogate "
                    "steps follow the AnycostFL bound; set surrogate.bound = 'anycostfl'"
                )
        _check_access(self, methods[name])
        if self.channel.downlink is not None and self.round.downlink_s > 0:
            raise ValueError(
                f"round.downlink_s={self.round.downlink_s} with [channel.downlink]: give either the constant "
                "download time or the per-device downlink, not both; set round.downlink_s = 0"
            )
        _check_selection(self, name, needs.asynchronous)
        mode = cost_mode(self.fleet)
        if mode not in needs.cost_modes:
            raise ValueError(
                f"method.name={name!r} with fleet.step_costs.kind={self.fleet.step_costs.kind!r}: {name} plans only "
                f"under the {' or '.join(needs.cost_modes)} cost model, not {mode!r}; set fleet.step_costs.kind="
                f"{'none' if mode == 'per_step' else 'normal'!r}"
            )
        why = self._allocation_refusal(methods, mode)
        if why:
            raise ValueError(f"channel.allocation={self.channel.allocation!r} {why}")
        return self

    def _allocation_refusal(self, methods: Mapping[str, Any], mode: str) -> str:
        """Why the scenario's ``channel.allocation`` cannot run (edgefl.fleet.allocation), or '' when it can."""
        ch, name = self.channel, self.method.name
        kind, cls = ch.allocation, methods[name]
        if kind == "equal":
            return ""
        takes = {m: c.takes_allocation for m, c in sorted(methods.items()) if not c.needs.asynchronous}
        if cls.needs.asynchronous:
            return (f"with method.name={name!r}: an asynchronous method dispatches jobs one at a time while others "
                    "hold their sub-bands, which a round's allocation does not share; use channel.allocation = 'equal'")
        if takes[name] == "none":
            all_ = ", ".join(m for m, t in takes.items() if t == "all")
            radio = ", ".join(m for m, t in takes.items() if t == "radio")
            return (f"with method.name={name!r}: {name} plans its devices without the allocation; it combines with "
                    f"{all_} (bandwidth, power and CPU frequency) and {radio} (bandwidth and power)")
        if ch.access == "tdma":
            return ("with channel.access='tdma': TDMA gives each upload the whole band in turn, the allocators "
                    "share it out at once (FDMA); use channel.access = 'fdma'")
        if self.selection.policy == "chen":
            return ("with selection.policy='chen': Chen et al.'s assignment sets each device's resource block and "
                    "power itself; use channel.allocation = 'equal'")
        if mode == "per_step":
            return (f"with fleet.step_costs.kind={self.fleet.step_costs.kind!r}: per-step costs do not depend on "
                    "bandwidth, power or frequency; set fleet.step_costs.kind = 'none'")
        if ch.bandwidth_mode != "split":
            return ("with channel.bandwidth_mode='fixed': the allocation shares one band among the round's devices; "
                    "set channel.bandwidth_mode = 'split'")
        if self.round.policy != "wait_all" and self.round.late == "finish":
            return (f"with round.policy={self.round.policy!r} and round.late='finish': a late job keeps its "
                    "sub-band into the next round, which that round's allocation cannot share; set round.late = "
                    "'cancel'")
        return ""


def _check_selection(scenario: Scenario, name: str, asynchronous: bool) -> None:
    """A ``[selection]`` policy other than ``"random"`` against the rest of the scenario: one ValueError line naming
    the keys that clash and what to set."""
    policy = scenario.selection.policy
    if policy == "random":
        return
    if asynchronous:
        raise ValueError(
            f"selection.policy={policy!r} with the asynchronous method {name!r}: it dispatches one device at a time "
            "into a free slot, so there is no round's set to choose; leave selection.policy = 'random'"
        )
    if scenario.round.policy == "over_select":
        raise ValueError(
            f"selection.policy={policy!r} with round.policy='over_select': over-selection starts more devices than "
            f"it keeps, {policy} chooses the set itself; set round.policy to 'deadline' or 'wait_all'"
        )
    if policy == "fedcs" and scenario.round.policy != "deadline":
        raise ValueError(
            f"selection.policy='fedcs' with round.policy={scenario.round.policy!r}: FedCS selects the devices that "
            "finish within the round's deadline; set round.policy='deadline' and round.deadline_s"
        )
    if policy == "chen":
        if scenario.channel.link_model != "shannon":
            raise ValueError(
                f"selection.policy='chen' with channel.link_model={scenario.channel.link_model!r}: Chen et al.'s "
                "powers and RBs are planned with Shannon's rate on each RB; set channel.link_model='shannon'"
            )
        if cost_mode(scenario.fleet) != "physical":
            raise ValueError(
                "selection.policy='chen' with fleet.step_costs: Chen et al.'s powers are planned from the upload's "
                "rate and radiated energy, which per-step costs replace; set fleet.step_costs.kind='none'"
            )


def _check_access(scenario: Scenario, cls: Any) -> None:
    """Refuse, in one line, what TDMA cannot play exactly (``cls``: the chosen method's class): TDMA under an
    asynchronous method (its jobs end at times fixed when each is dispatched, on a sub-band of its own; on one
    shared channel a job's end would depend on jobs dispatched after it), and TDMA under ``round.policy =
    "deadline"`` with a method whose plan fills T_max (:meth:`edgefl.methods.base.Method.plans_to_t_max`: it plans
    compute and upload within T_max as if each upload started when its compute ended, as under FDMA; under TDMA it
    waits for the channel, so those plans would miss T_max). Under FedCS a method that plans each device alone is
    let through whatever it plans: FedCS schedules the uploads from that very plan, so the schedule is exact."""
    channel, name = scenario.channel, scenario.method.name
    if channel.access != "tdma":
        return
    if cls.needs.asynchronous:
        raise ValueError(
            f"channel.access='tdma' with method.name={name!r}: an asynchronous method's jobs each end at a time "
            "fixed at dispatch on a sub-band of their own, which one shared TDMA channel does not give; set "
            "channel.access = 'fdma'"
        )
    if scenario.round.policy != "deadline" or not cls.plans_to_t_max(scenario.method.settings_of(name)):
        return
    if scenario.selection.policy == "fedcs" and cls.plans_each_device_alone:
        return
    raise ValueError(
        f"channel.access='tdma' with round.policy='deadline' and method.name={name!r}: {name} plans each device's "
        "compute and upload to fill T_max as if its upload started when it finished computing (FDMA), but under "
        "TDMA it waits for the channel; use round.policy = 'wait_all' or 'over_select', channel.access = 'fdma', "
        "or a plan that does not fill T_max (fedavg, fednova, fedavg_dropout, ccfedavg with cpu_policy = 'max'; "
        "heterofl with assignment = 'fix' or 'dynamic')"
    )


# ---------------------------------------------------------------------------------------------- loading


def _format_validation_error(exc: ValidationError, methods: Mapping[str, Any]) -> str:
    parts = []
    for err in exc.errors():
        # pydantic adds the union branch / validator names to the location; keep only field names
        loc = ".".join(
            str(p) for p in err["loc"] if not (isinstance(p, str) and ("[" in p or p.startswith("function")))
        )
        msg = err["msg"].removeprefix("Value error, ")
        value = err.get("input")
        if err["type"] == "extra_forbidden":
            near = nearest_key(loc.split("."), Scenario, method_tables(methods))
            parts.append(f"{loc}: unknown key" + (f"; did you mean {near}?" if near else ""))
        elif loc and isinstance(value, dict):  # a whole-section check: its message names the fields
            parts.append(f"{loc}.{msg}" if re.match(r"[A-Za-z_]\w*=", msg) else f"{loc}: {msg}")
        elif loc:
            parts.append(f"{loc}={short_repr(value)}: {msg}")
        else:
            parts.append(msg)
    # the same field may appear once per union branch: keep the first message of each
    seen: dict[str, str] = {}
    for p in parts:
        seen.setdefault(p.split(":", 1)[0], p)
    return "; ".join(seen.values())


def short_repr(value: Any) -> str:
    """``repr(value)``, cut to 60 characters (ending in ``...``) for an error message."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def scenario_from_dict(data: dict[str, Any], *, methods: Mapping[str, Any]) -> Scenario:
    """Validate a scenario given as a dict (as parsed from TOML) against the method registry ``methods`` (name ->
    method class); raise :class:`ScenarioError` if invalid."""
    if not isinstance(data, dict):
        raise ScenarioError(f"scenario must be a table of keys, got {type(data).__name__}")
    try:
        return Scenario.model_validate(data, context={"methods": methods})
    except ValidationError as exc:
        raise ScenarioError(f"invalid scenario: {_format_validation_error(exc, methods)}") from None
    except (TypeError, ValueError, OverflowError) as exc:  # defensive: a validator that raised outside pydantic
        raise ScenarioError(f"invalid scenario: {exc}") from None


def parse_override(item: str) -> tuple[list[str], Any]:
    """Parse ``key.sub=value`` (value read as a TOML value, else as a bare string)."""
    if "=" not in item:
        raise ScenarioError(f"--set {item!r}: expected KEY=VALUE, e.g. channel.bandwidth_hz=2e6")
    key, raw = item.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ScenarioError(f"--set {item!r}: empty key")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return key.split("."), value


def set_dotted(data: dict[str, Any], path: Sequence[str], value: Any, label: str) -> None:
    """Set ``value`` at the key ``path`` (``["channel", "bandwidth_hz"]``) of a scenario dict, in place, making
    missing tables; the same quantity given in the other unit is dropped (``bandwidth_hz`` replaces
    ``bandwidth_mhz``). A non-table on the way raises :class:`ScenarioError` starting with ``label``."""
    node = data
    for part in path[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ScenarioError(f"{label}: {part} is not a table")
        node = child
    node[path[-1]] = value
    aliases = UNIT_ALIASES.get(path[0], {}) if len(path) == 2 else {}
    for alias, si in aliases.items():
        if path[-1] == si:
            node.pop(alias, None)
        elif path[-1] == alias:
            node.pop(si, None)


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Return a copy of ``data`` with ``--set`` overrides applied (dotted keys address nested tables). An override
    of ``fleet.devices`` (a device table) drops the ``fleet.n_devices`` of ``data``: the table's rows give it."""
    import copy

    data = copy.deepcopy(data)
    paths = [parse_override(item)[0] for item in overrides]
    if ["fleet", "devices"] in paths and ["fleet", "n_devices"] not in paths and isinstance(data.get("fleet"), dict):
        data["fleet"].pop("n_devices", None)  # a device table set here gives the fleet's size the file gave
    for item in overrides:
        path, value = parse_override(item)
        if path == ["fleet", "devices"] and isinstance(value, str):
            value = _table_from_here(item, value)
        set_dotted(data, path, value, f"--set {item!r}")
    return data


def _table_from_here(item: str, value: str) -> str:
    """The device table a ``--set fleet.devices=PATH`` names, read from the current folder (where the command
    runs; a path in a scenario file is read from that file's folder): its absolute path, so that any later message
    names where it was read. A missing file raises :class:`ScenarioError` naming the folder it was looked for in."""
    from edgefl.scenario.device_table import FRAME_PREFIX

    if value.startswith(FRAME_PREFIX):
        return value
    path = Path(value).expanduser()
    here = Path.cwd()
    if not path.is_file():
        where = f"in the current folder {str(here)!r}" if not path.is_absolute() else "there"
        raise ScenarioError(f"--set {item!r}: no such file {where} (a path given with --set is read from the "
                            "current folder; one in a scenario file from that file's folder)")  # fmt: skip
    return str((here / path).resolve())


def read_scenario_dict(source: str | Path) -> dict[str, Any]:
    """Read a scenario TOML given as a preset name or a file path (no validation)."""
    from scenarios import preset_path

    path = Path(source)
    if not path.suffix and not path.exists():
        path = preset_path(str(source))  # raises ScenarioError naming the presets when unknown
    if not path.is_file():
        raise ScenarioError(f"scenario file {str(path)!r} does not exist (see `edgefl scenarios list`)")
    data = read_toml(path, str(path))
    fleet = data.get("fleet")
    if isinstance(fleet, dict) and isinstance(fleet.get("devices"), str):  # a device table beside the scenario
        fleet["devices"] = str((path.parent / Path(fleet["devices"]).expanduser()).resolve())
    return data


def read_toml(path: Path, where: str) -> dict[str, Any]:
    """The TOML file ``path`` as a dict; :class:`ScenarioError` starting with ``where`` if it is not UTF-8 TOML."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{where}: not valid TOML: {exc}") from None
    except UnicodeDecodeError:
        raise ScenarioError(f"{where}: not UTF-8 text") from None


def load_scenario(
    source: str | Path, overrides: list[str] | None = None, *, seed: int | None = None, methods: Mapping[str, Any]
) -> Scenario:
    """Load a preset name or TOML path, apply ``--set`` overrides and ``--seed``, and validate against the method
    registry ``methods``."""
    data = apply_overrides(read_scenario_dict(source), list(overrides or []))
    if seed is not None:
        data["seed"] = seed
    return scenario_from_dict(data, methods=methods)


def scenario_to_toml(scenario: Scenario) -> str:
    """The fully resolved scenario (every default filled in, SI units) as TOML text."""
    data = scenario.model_dump(mode="json", exclude_none=True)
    return tomli_w.dumps(data)
