"""The plan artifact: what every method returns and what ``publish`` writes.

Optimizers return a :class:`Decision` (placement, nodes, shedding, predictions, solver stats);
the pipeline wraps it into a :class:`Plan` with identity and provenance. The JSON Schema of the
published file is generated from :class:`Plan` (``plan_json_schema``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

PLAN_SCHEMA = "streamplan.plan/v1"
NodeAction = Literal["keep", "hire", "release"]
SolverStatus = Literal["optimal", "feasible", "heuristic", "degraded", "infeasible", "error"]
FEASIBLE_STATUSES = frozenset({"optimal", "feasible", "heuristic", "degraded"})


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Replicas(_Model):
    """``replicas`` instances of an operator on ``node``."""

    node: str
    replicas: int = Field(ge=1)


class Prediction(_Model):
    """What the method's model predicts for the plan."""

    response_time_ms: dict[str, float] = Field(default_factory=dict, description="per query")
    node_utilisation: dict[str, float] = Field(default_factory=dict)
    cost_per_hour: float | None = None
    downtime_s: float | None = None
    extra: dict[str, float] = Field(default_factory=dict)


class SolverStats(_Model):
    """How the plan was found."""

    name: str
    version: str = ""
    status: SolverStatus
    objective: float | None = None
    bound: float | None = None
    gap: float | None = None
    time_s: float = Field(ge=0)
    n_vars: int | None = None
    n_conss: int | None = None
    message: str = ""
    extra: dict[str, float] = Field(default_factory=dict)


class Decision(_Model):
    """A method's answer: the same type for every planning method."""

    placement: dict[str, list[Replicas]]
    nodes: dict[str, NodeAction]
    node_types: dict[str, str] = Field(
        default_factory=dict, description="node -> type, required for hired nodes"
    )
    shedding: dict[str, dict[str, float]] = Field(default_factory=dict)
    predicted: Prediction
    solver: SolverStats
    violations: list[str] = Field(default_factory=list, description="soft constraints not met")
    explanations: dict[str, list[str]] = Field(
        default_factory=dict, description="operator -> why it changed or was held back"
    )

    @property
    def feasible(self) -> bool:
        """Whether the plan may be published."""
        return self.solver.status in FEASIBLE_STATUSES

    @model_validator(mode="after")
    def _check(self) -> Decision:
        if self.solver.status not in FEASIBLE_STATUSES:
            return self
        for op, entries in self.placement.items():
            if not entries:
                raise ValueError(f"placement[{op}] is empty")
            for e in entries:
                if self.nodes.get(e.node) == "release":
                    raise ValueError(f"placement[{op}] uses node {e.node!r} marked release")
                if e.node not in self.nodes:
                    raise ValueError(f"placement[{op}] uses node {e.node!r} missing from nodes")
        for node, action in self.nodes.items():
            if action == "hire" and node not in self.node_types:
                raise ValueError(f"nodes[{node}] is hired but node_types has no type for it")
        for op, shares in self.shedding.items():
            for t, share in shares.items():
                if not 0.0 <= share <= 1.0:
                    raise ValueError(f"shedding[{op}][{t}] must be in [0, 1], got {share}")
        return self


class PlanInputs(_Model):
    """Provenance: re-derive the plan by Delta time travel on these versions."""

    delta_versions: dict[str, int] = Field(default_factory=dict)
    fitted_model_id: str
    config_hash: str
    interval_start: str
    interval_end: str


class Plan(Decision):
    """The published configuration (``streamplan.plan/v1``)."""

    schema_: Literal["streamplan.plan/v1"] = Field(default=PLAN_SCHEMA, alias="schema")
    plan_id: str
    app: str
    created_at: str
    method: str
    inputs: PlanInputs
    mlflow_run_id: str | None = None
    previous_plan_id: str | None = None

    @classmethod
    def from_decision(
        cls, decision: Decision, *, app: str, method: str, inputs: PlanInputs, **extra: Any
    ) -> Plan:
        """Wrap a method's decision; ``plan_id`` is derived from app, interval and method,
        so re-planning the same interval yields the same id (idempotent runs)."""
        return cls(
            **decision.model_dump(),
            plan_id=plan_id_for(app, inputs.interval_end, method),
            app=app,
            method=method,
            inputs=inputs,
            created_at=extra.pop("created_at", datetime.now(UTC).isoformat(timespec="seconds")),
            **extra,
        )

    def to_json(self) -> str:
        """Canonical JSON text of the artifact."""
        return self.model_dump_json(by_alias=True, indent=2)


def plan_id_for(app: str, interval_end: str, method: str) -> str:
    """Deterministic plan id: one plan per app, interval (end, UTC) and method."""
    end = datetime.fromisoformat(interval_end.replace("Z", "+00:00")).astimezone(UTC)
    return f"{app}-{end:%Y%m%dT%H%M%SZ}-{method}"


def plan_json_schema() -> dict[str, Any]:
    """JSON Schema of the published plan file, generated from :class:`Plan`."""
    schema = Plan.model_json_schema(by_alias=True)
    schema["$id"] = PLAN_SCHEMA
    return schema
