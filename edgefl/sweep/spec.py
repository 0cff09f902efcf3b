"""Sweep files: a base scenario, fixed overrides, a grid of overrides and a list of seeds (TOML, validated).

A sweep file reads::

    name = "quickstart_bandwidth"          # optional; default: the file's stem
    description = "..."                    # optional
    base = "quickstart"                    # preset name, or a TOML path relative to this file
    seeds = [0, 1, 2]                      # one run per grid point and seed
    target_accuracy = 0.8                  # optional: time/energy to reach it (or target_loss = 0.5; the
                                           # test loss, or the training loss in runs without a test loss)
    threads_per_run = 1                    # optional: torch threads (and Ray CPUs) of one run
    run_reports = true                     # optional: write each run's report.html

    [set]                                  # optional: overrides applied to every run (dotted keys or tables)
    rounds = 10

    [grid]                                 # dotted key -> list of values; runs = cartesian product x seeds
    "channel.bandwidth_mhz" = [0.5, 1.0, 2.0]

Every run's scenario is built and validated when the sweep is loaded, so a bad grid value fails before any
run starts. Run ids are readable and depend only on the run's grid values and seed (``bandwidth_mhz=0.5-seed0``),
so a re-run of an edited sweep finds the directories of the runs it still contains.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

import tomli_w
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from edgefl.errors import ScenarioError
from edgefl.scenario.loading import Scenario, read_scenario_dict, read_toml, scenario_to_toml, set_dotted, short_repr
from edgefl.run.load import scenario_from_dict
from edgefl.output.targets import Target

__all__ = ["SweepSpec", "Sweep", "RunSpec", "Target", "load_sweep", "sweep_from_dict", "list_sweep_presets"]

_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9._=,+\-]")
_ID_MAX = 120
Seed = Annotated[int, Field(ge=0, le=2**63 - 1, strict=True)]  # like Scenario.seed
_RESERVED = {"seed": "give seeds in the top-level `seeds` list", "name": "the sweep sets no run names"}


class SweepSpec(BaseModel):
    """The sweep file's contents, validated (unknown keys rejected)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field("sweep", min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.\-]+$")
    description: str = ""
    base: str = Field(min_length=1)
    seeds: list[Seed] = Field(min_length=1)
    set: dict[str, Any] = Field(default_factory=dict)
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    target_accuracy: float | None = Field(None, gt=0, le=1, allow_inf_nan=False)
    target_loss: float | None = Field(None, gt=0, allow_inf_nan=False)
    target_loss_column: Literal["test_loss", "train_loss"] | None = None
    threads_per_run: int = Field(1, ge=1, le=1024)
    run_reports: bool = True  # write each run's report.html (about 5 MB each: plotly.js inlined)

    @model_validator(mode="before")
    @classmethod
    def _flatten(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            for section in ("set", "grid"):
                if isinstance(data.get(section), dict):
                    data[section] = _flatten(data[section])
        return data

    @field_validator("seeds")
    @classmethod
    def _unique_seeds(cls, seeds: list[int]) -> list[int]:
        dup = sorted({s for s in seeds if seeds.count(s) > 1})
        if dup:
            raise ValueError(f"seed {dup[0]} appears more than once; give each seed once")
        return seeds

    @field_validator("set", "grid")
    @classmethod
    def _keys(cls, table: dict[str, Any]) -> dict[str, Any]:
        for key in table:
            if not _KEY.match(key):
                raise ValueError(f"key {key!r} is not a dotted scenario key such as channel.bandwidth_mhz")
            if key in _RESERVED:
                raise ValueError(f"key {key!r} cannot be set here: {_RESERVED[key]}")
        return table

    @field_validator("set")
    @classmethod
    def _set_values(cls, table: dict[str, Any]) -> dict[str, Any]:
        for key, value in table.items():
            _check_value(key, value)
        return table

    @field_validator("grid", mode="before")
    @classmethod
    def _grid_lists(cls, grid: Any) -> Any:
        if isinstance(grid, dict):
            for key, values in grid.items():
                if not isinstance(values, list):
                    raise ValueError(f"{key}={values!r}: give a list of values, e.g. [{values!r}]")
        return grid

    @field_validator("grid")
    @classmethod
    def _grid_values(cls, grid: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for key, values in grid.items():
            if not values:
                raise ValueError(f"{key}=[]: give at least one value")
            seen: set[str] = set()
            for value in values:
                _check_value(key, value)
                canon = json.dumps(value, sort_keys=True)
                if canon in seen:
                    raise ValueError(f"{key}: value {value!r} appears more than once; give each value once")
                seen.add(canon)
        return grid

    @model_validator(mode="after")
    def _cross(self) -> SweepSpec:
        both = sorted(set(self.set) & set(self.grid))
        if both:
            raise ValueError(f"{both[0]} is in both [set] and [grid]; put it in one of them")
        if self.target_accuracy is not None and self.target_loss is not None:
            raise ValueError("give either target_accuracy or target_loss, not both")
        if self.target_loss_column is not None and self.target_loss is None:
            raise ValueError("target_loss_column needs target_loss")
        return self

    @property
    def target(self) -> Target | None:
        """The target to time, or ``None`` when the sweep file gives none."""
        if self.target_accuracy is not None:
            return Target(columns=("test_accuracy",), value=self.target_accuracy, sense="max")
        if self.target_loss is not None:
            columns = (self.target_loss_column,) if self.target_loss_column else ("test_loss", "train_loss")
            return Target(columns=columns, value=self.target_loss, sense="min")
        return None


@dataclass(frozen=True, kw_only=True)
class RunSpec:
    """One run of a sweep: its id, grid values (dotted key -> value, in grid order), seed and scenario."""

    index: int
    run_id: str
    point: str  # the grid point without the seed, e.g. "bandwidth_mhz=0.5" ("base" for an empty grid)
    params: dict[str, Any]
    seed: int
    scenario: Scenario

    @property
    def scenario_toml(self) -> str:
        """The fully resolved scenario as TOML text (what the worker runs and ``scenario.toml`` holds)."""
        return scenario_to_toml(self.scenario)


@dataclass(frozen=True, kw_only=True)
class Sweep:
    """A loaded sweep: the spec, where it came from, the base scenario and every run (validated)."""

    spec: SweepSpec
    source: Path | None
    base_source: str
    runs: tuple[RunSpec, ...]

    @property
    def grid_keys(self) -> list[str]:
        return list(self.spec.grid)

    def resolved_toml(self) -> str:
        """The spec with ``base`` resolved (absolute file path, or the preset name), as TOML text."""
        data = self.spec.model_dump(mode="json", exclude_none=True)
        data["base"] = self.base_source
        return tomli_w.dumps(data)


def list_sweep_presets() -> list[str]:
    """Names of the sweeps shipped in ``scenarios/sweeps/``."""
    return sorted(p.stem for p in _presets_dir().glob("*.toml"))


def load_sweep(source: str | Path) -> Sweep:
    """Load a sweep file (or the name of a shipped sweep), validate it and every run's scenario."""
    path = Path(source)
    if not path.suffix and not path.exists():
        candidate = _presets_dir() / f"{source}.toml"
        if not candidate.is_file():
            shipped = ", ".join(list_sweep_presets()) or "none"
            raise ScenarioError(f"sweep {str(source)!r}: no such file or shipped sweep; shipped sweeps: {shipped}")
        path = candidate
    if not path.is_file():
        raise ScenarioError(f"sweep file {str(path)!r} does not exist")
    data = read_toml(path, f"sweep file {str(path)!r}")
    data.setdefault("name", _safe_name(path.stem))
    return sweep_from_dict(data, base_dir=path.parent, source=path)


def sweep_from_dict(data: dict[str, Any], *, base_dir: Path | None = None, source: Path | None = None) -> Sweep:
    """Validate a sweep given as a dict; ``base_dir`` resolves a relative ``base`` path (default: cwd)."""
    where = f"sweep {str(source)!r}" if source is not None else "sweep"
    try:
        spec = SweepSpec.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(f"{where}: {_format_errors(exc)}") from None
    base_source, base_data = _read_base(spec.base, base_dir or Path.cwd(), where)
    try:
        base_data = _with_values(base_data, spec.set)
    except ScenarioError as exc:
        raise ScenarioError(f"{where}: [set]: {exc}") from None
    runs = tuple(_expand(spec, base_data, where))
    return Sweep(spec=spec, source=source, base_source=base_source, runs=runs)


# ---------------------------------------------------------------------------------------------- helpers


def _presets_dir() -> Path:
    return Path(str(resources.files("scenarios"))) / "sweeps"


def _safe_name(stem: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_.\-]", "_", stem)[:100]
    return name or "sweep"


def _flatten(table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"channel": {"bandwidth_mhz": [1]}}`` -> ``{"channel.bandwidth_mhz": [1]}`` (dicts are sections)."""
    out: dict[str, Any] = {}
    for key, value in table.items():
        full = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, f"{full}."))
        else:
            out[full] = value
    return out


def _check_value(key: str, value: Any) -> None:
    if isinstance(value, dict):
        raise ValueError(f"{key}: a value must be a number, string, boolean or array, got a table")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{key}={value!r}: must be finite")
    if isinstance(value, list):
        for item in value:
            _check_value(key, item)
    elif not isinstance(value, (str, int, float, bool)):
        raise ValueError(f"{key}={value!r}: must be a number, string, boolean or array")


def _format_errors(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            allowed = ", ".join(SweepSpec.model_fields)
            parts.append(f"{loc}: unknown key (allowed: {allowed})")
        elif err["type"] == "missing":
            parts.append(f"{loc}: missing (required)")
        elif loc and not isinstance(err.get("input"), dict):
            parts.append(f"{loc}={short_repr(err.get('input'))}: {msg}")
        elif loc:
            parts.append(f"{loc}: {msg}")
        else:
            parts.append(msg)
    return "; ".join(dict.fromkeys(parts))


def _read_base(base: str, base_dir: Path, where: str) -> tuple[str, dict[str, Any]]:
    """(resolved base: absolute path or preset name, scenario dict) of ``base``."""
    from scenarios import preset_path

    is_path = base.endswith(".toml") or "/" in base or "\\" in base
    try:
        if is_path:
            path = (base_dir / base).resolve()
            if not path.is_file():
                raise ScenarioError(f"base={base!r}: no file {str(path)!r} (a path is relative to the sweep file)")
            return str(path), read_scenario_dict(path)
        return base, read_scenario_dict(preset_path(base))
    except ScenarioError as exc:
        raise ScenarioError(f"{where}: {exc}") from None


def _with_values(data: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """A copy of the scenario dict ``data`` with ``values`` (dotted key -> value) set, as ``--set`` would."""
    data = copy.deepcopy(data)
    for key, value in values.items():
        set_dotted(data, key.split("."), copy.deepcopy(value), key)
    return data


def _id_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "_".join(_id_value(v) for v in value) or "empty"
    return str(value) if not isinstance(value, float) else repr(value)


def _run_id(params: dict[str, Any], short: dict[str, str], seed: int) -> str:
    point = ",".join(f"{short[k]}={_id_value(v)}" for k, v in params.items())
    point = _ID_UNSAFE.sub("_", point)
    if len(point) > _ID_MAX:  # keep ids readable and path-safe; the hash keeps them unique
        digest = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:8]
        point = f"{point[:_ID_MAX - 9]}~{digest}"
    return f"{point}-seed{seed}" if point else f"seed{seed}"


def _short_keys(keys: list[str]) -> dict[str, str]:
    """The last component of each dotted key, or the full key where two keys share a last component."""
    last = [k.rsplit(".", 1)[-1] for k in keys]
    return {k: (s if last.count(s) == 1 else k) for k, s in zip(keys, last)}


def _expand(spec: SweepSpec, base_data: dict[str, Any], where: str) -> list[RunSpec]:
    keys = list(spec.grid)
    short = _short_keys(keys)
    runs: list[RunSpec] = []
    ids: dict[str, dict[str, Any]] = {}
    for values in itertools.product(*(spec.grid[k] for k in keys)):
        params = dict(zip(keys, values))
        try:
            point_data = _with_values(base_data, params)
        except ScenarioError as exc:
            raise ScenarioError(f"{where}: [grid] {_point(params)}: {exc}") from None
        for seed in spec.seeds:
            run_id = _run_id(params, short, seed)
            if run_id in ids:
                raise ScenarioError(
                    f"{where}: grid points {_point(ids[run_id])} and {_point(params)} give the same run id "
                    f"{run_id!r}; make the values distinct"
                )
            ids[run_id] = params
            try:
                scenario = scenario_from_dict({**point_data, "seed": seed})
            except ScenarioError as exc:
                raise ScenarioError(f"{where}: [grid] {_point(params)}, seed {seed}: {exc}") from None
            point = ", ".join(f"{short[k]}={_id_value(v)}" for k, v in params.items()) or "base"
            runs.append(
                RunSpec(index=len(runs), run_id=run_id, point=point, params=params, seed=seed, scenario=scenario)
            )
    return runs


def _point(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in params.items()) or "(base)"
