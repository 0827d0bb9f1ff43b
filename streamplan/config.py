"""Application configuration: one YAML file per application, validated by pydantic.

Errors name the offending field (``ConfigError``), so a broken file fails fast and clearly.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator


class ConfigError(ValueError):
    """A configuration file that cannot be used; the message names the field and value."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class OperatorSpec(_Strict):
    """One operator of the application's dataflow."""

    name: str = Field(min_length=1, description="unique operator id")
    query: str = Field(description="query (EPN) the operator belongs to")


class QuerySpec(_Strict):
    """A continuous query: its operators form one event-processing network (EPN)."""

    name: str = Field(min_length=1)
    sources: list[str] = Field(min_length=1, description="operators receiving the input stream")
    sinks: list[str] = Field(min_length=1, description="operators whose output ends the query")
    target_rt_ms: float = Field(gt=0, description="target mean response time T_i (ms)")


class NodeType(_Strict):
    """A machine type of the resource catalogue."""

    name: str
    cores: int = Field(default=1, ge=1)
    speed: float = Field(default=1.0, gt=0, description="speed relative to calibration host")
    price_per_hour: float = Field(default=0.0, ge=0)
    billing_unit_s: int = Field(default=3600, gt=0)
    tier: Literal["edge", "cloud"] = "cloud"
    memory_gb: float = Field(default=1.7, gt=0)


class NodeSpec(_Strict):
    """A node that exists at the start (the initial deployment's machines)."""

    name: str
    type: str


class ServiceSpec(_Strict):
    """True service-time distribution of an operator, used only by the simulator."""

    dist: Literal["exponential", "deterministic", "lognormal", "uniform"] = "exponential"
    mean_ms: float = Field(gt=0)
    scv: float = Field(default=1.0, ge=0, description="squared coefficient of variation")


class WorkloadPhase(_Strict):
    """Input rate per query from ``start_s`` on (Poisson arrivals)."""

    start_s: float = Field(default=0.0, ge=0)
    rates: dict[str, float] = Field(description="query -> input events/s")


class SimNodeTypeSpec(_Strict):
    """True edge/cloud behaviour of a node type in the simulated world (seed 004); only the
    simulator reads it, the planner's assumptions live in ``method.params``."""

    interference_slope: float = Field(
        default=0.0, ge=0, description="pi(m) = slope*(m-1): node busy time is the operators' "
        "exclusive busy time x (1 + pi(m)) for m busy co-located operators",
    )
    idle_power_w: float | None = Field(
        default=None, ge=0,
        description="kappa (W); with it, power_w = kappa + energy_j_per_event x records/s "
        "(None keeps the illustrative linear power model)",
    )
    energy_j_per_event: float = Field(default=0.0, ge=0, description="epsilon: J per input record")
    battery_wh: float | None = Field(
        default=None, ge=0, description="charge at the interval start; None: no battery reported"
    )


class SimLinkSpec(_Strict):
    """True latency and bandwidth of the links between two tiers (reported per node pair)."""

    latency_ms: float = Field(ge=0)
    bandwidth_mbps: float = Field(gt=0)
    jitter: float = Field(
        default=0.0, ge=0, lt=1, description="relative uniform noise of each window's reading"
    )


class SimulationSpec(_Strict):
    """The simulator's world: true service times, selectivities and the workload."""

    seed: int = 7
    duration_s: float = Field(default=600.0, gt=0)
    service: dict[str, ServiceSpec]
    selectivity: dict[str, float] = Field(default_factory=dict)
    output_types: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description="operator -> event type -> share of its output records (sums to 1); "
        "operators listed here report records_in/out_by_type",
    )
    workload: list[WorkloadPhase] = Field(min_length=1)
    event_bytes: dict[str, float] = Field(
        default_factory=dict,
        description="operator -> true size of its output events (bytes); operators listed "
        "here report bytes_out (seed 004's delta)",
    )
    node_types: dict[str, SimNodeTypeSpec] = Field(
        default_factory=dict,
        description="node type -> interference, power and battery (edge + cloud telemetry)",
    )
    links: dict[Literal["edge-edge", "edge-cloud", "cloud-cloud"], SimLinkSpec] = Field(
        default_factory=dict, description="tier pair -> link figures, one link record per "
        "ordered node pair and window",
    )


class MethodSpec(_Strict):
    """The planning method and its parameters (validated by the method itself)."""

    name: str = "binpack"
    params: dict[str, Any] = Field(default_factory=dict)


class FitSpec(_Strict):
    """How the fit stage turns telemetry into a model."""

    rate_statistic: Literal["max", "p95", "mean"] = "max"
    cal_max_rate: float = Field(default=32.0, gt=0, description="low-load calibration bound, ev/s")
    min_cal_windows: int = Field(default=5, ge=1)
    service_source: Literal["auto", "direct", "busy_time", "low_load"] = Field(
        default="auto",
        description="auto: per-record service sums if present, else busy time, else low-load "
        "calibration (seed 000: b = mean of rho/AR over windows where the EPN is alone)",
    )
    deviation_tolerance: float = Field(
        default=0.2, ge=0, allow_inf_nan=False,
        description="measure flags a query measured above (1 + this) x its predicted RT",
    )
    correct_predictions: bool = Field(
        default=True,
        description="apply the nightly correction fitted on measured plans to predictions",
    )
    correction_min_pairs: int = Field(default=5, ge=2, description="fewer: no correction")
    correction_half_life: float | None = Field(
        default=48.0, gt=0, allow_inf_nan=False,
        description="pairs back in time at which a pair's weight halves (None: equal weights)",
    )


class AppConfig(_Strict):
    """One application: topology, resources, initial deployment, method, fit and simulation."""

    app: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    window_s: float = Field(default=10.0, gt=0, description="telemetry report window")
    operators: list[OperatorSpec] = Field(min_length=1)
    edges: list[tuple[str, str]] = Field(default_factory=list)
    queries: list[QuerySpec] = Field(min_length=1)
    node_types: list[NodeType] = Field(min_length=1)
    nodes: list[NodeSpec] = Field(min_length=1)
    deployment: dict[str, list[tuple[str, int]]] = Field(
        description="operator -> [(node, replicas)] in force at the start"
    )
    method: MethodSpec = MethodSpec()
    fit: FitSpec = FitSpec()
    simulation: SimulationSpec | None = None

    @model_validator(mode="after")
    def _check_references(self) -> AppConfig:
        ops = {o.name for o in self.operators}
        queries = {q.name for q in self.queries}
        types = {t.name for t in self.node_types}
        nodes = {n.name for n in self.nodes}
        _unique("operators", [o.name for o in self.operators])
        _unique("queries", [q.name for q in self.queries])
        _unique("nodes", [n.name for n in self.nodes])
        for i, o in enumerate(self.operators):
            _known(f"operators[{i}].query", o.query, queries)
        for i, (a, b) in enumerate(self.edges):
            _known(f"edges[{i}][0]", a, ops)
            _known(f"edges[{i}][1]", b, ops)
        for q in self.queries:
            for field in ("sources", "sinks"):
                for op in getattr(q, field):
                    _known(f"queries[{q.name}].{field}", op, ops)
        for i, n in enumerate(self.nodes):
            _known(f"nodes[{i}].type", n.type, types)
        for op, entries in self.deployment.items():
            _known("deployment", op, ops)
            for node, replicas in entries:
                _known(f"deployment[{op}].node", node, nodes)
                if replicas < 1:
                    raise ValueError(f"deployment[{op}].replicas must be >= 1, got {replicas}")
        missing = ops - set(self.deployment)
        if missing:
            raise ValueError(f"deployment is missing operators {sorted(missing)}")
        if self.simulation is not None:
            for op in self.simulation.service:
                _known("simulation.service", op, ops)
            absent = ops - set(self.simulation.service)
            if absent:
                raise ValueError(f"simulation.service is missing operators {sorted(absent)}")
            for op, sel in self.simulation.selectivity.items():
                _known("simulation.selectivity", op, ops)
                if sel < 0:
                    raise ValueError(f"simulation.selectivity[{op}] must be >= 0, got {sel}")
            for op, shares in self.simulation.output_types.items():
                _known("simulation.output_types", op, ops)
                _check_shares(f"simulation.output_types[{op}]", shares)
            for op, size in self.simulation.event_bytes.items():
                _known("simulation.event_bytes", op, ops)
                if not (size > 0 and math.isfinite(size)):
                    raise ValueError(f"simulation.event_bytes[{op}] must be > 0, got {size}")
            for name in self.simulation.node_types:
                _known("simulation.node_types", name, types)
            for i, phase in enumerate(self.simulation.workload):
                for q, rate in phase.rates.items():
                    _known(f"simulation.workload[{i}].rates", q, queries)
                    if rate < 0:
                        raise ValueError(
                            f"simulation.workload[{i}].rates[{q}] must be >= 0, got {rate}"
                        )
        return self

    # --- lookups used across the code base -------------------------------------------------
    def query_operators(self, query: str) -> list[str]:
        """Operators of one query, in configuration order."""
        return [o.name for o in self.operators if o.query == query]

    def node_type(self, node: str) -> NodeType:
        """The type of an existing node."""
        by_name = {t.name: t for t in self.node_types}
        return by_name[{n.name: n.type for n in self.nodes}[node]]

    def config_hash(self) -> str:
        """Stable hash of the configuration (plans record it as an input)."""
        blob = json.dumps(self.model_dump(mode="json"), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


def _unique(field: str, names: list[str]) -> None:
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise ValueError(f"{field}: duplicate name {n!r}")
        seen.add(n)


def _check_shares(field: str, shares: dict[str, float]) -> None:
    """A discrete distribution over event types: non-empty, shares >= 0 summing to 1."""
    if not shares:
        raise ValueError(f"{field}: needs at least one event type")
    for t, share in shares.items():
        if not (share >= 0):  # NaN fails too
            raise ValueError(f"{field}[{t}] must be >= 0, got {share}")
    if abs(sum(shares.values()) - 1.0) > 1e-6:
        raise ValueError(f"{field}: shares must sum to 1, got {sum(shares.values()):.6g}")


def _known(field: str, value: str, allowed: set[str]) -> None:
    if value not in allowed:
        raise ValueError(f"{field}: unknown name {value!r} (known: {sorted(allowed)})")


def load_config(path: str | Path) -> AppConfig:
    """Read and validate an application YAML file.

    Raises ``ConfigError`` naming the file, the field path and the offending value.
    """
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: file not found") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: top level must be a mapping, got {type(raw).__name__}")
    try:
        return AppConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"{path}: {_describe(exc)}") from exc


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "<root>"
        value = err.get("input")
        shown = repr(value) if not isinstance(value, dict | list) else type(value).__name__
        parts.append(f"field {loc!r}: {err['msg']} (value: {shown})")
    return "; ".join(parts)
