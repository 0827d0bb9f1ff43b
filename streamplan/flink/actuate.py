"""Actuation: a published plan as Flink configuration, and a restart that applies it.

The plan's replicas per operator (summed over nodes) become the job vertex's parallelism,
rendered as ``pipeline.jobvertex-parallelism-overrides`` (vertex id -> parallelism) and as
a Flink Kubernetes operator ``FlinkDeployment`` patch setting that key.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import yaml

from streamplan.flink.cluster import OVERRIDES_KEY, FlinkJob, JobSpec
from streamplan.flink.rest import Scrape, scrape
from streamplan.plan import Decision
from streamplan.publish import atomic_write


class ActuationError(ValueError):
    """The plan cannot be mapped onto the running job."""


def target_parallelism(plan: Decision) -> dict[str, int]:
    """Operator -> parallelism: the plan's replicas summed over nodes."""
    return {op: sum(r.replicas for r in reps) for op, reps in sorted(plan.placement.items())}


def render_overrides(plan: Decision, running: Scrape) -> dict[str, int]:
    """Job vertex id -> parallelism for every operator of the plan."""
    missing = sorted(set(plan.placement) - set(running.vertices))
    if missing:
        raise ActuationError(
            f"plan operators {missing} are not vertices of job {running.job_name} "
            f"({running.job_id}); vertices: {sorted(running.vertices)}"
        )
    return {running.vertices[op][0]: p for op, p in target_parallelism(plan).items()}


def overrides_value(overrides: dict[str, int]) -> str:
    """The configuration value: ``vid:p,vid:p`` sorted by vertex id."""
    return ",".join(f"{vid}:{p}" for vid, p in sorted(overrides.items()))


def deployment_patch(overrides: dict[str, int], name: str) -> str:
    """A ``FlinkDeployment`` merge patch (YAML) setting the overrides."""
    patch = {
        "apiVersion": "flink.apache.org/v1beta1",
        "kind": "FlinkDeployment",
        "metadata": {"name": name},
        "spec": {"flinkConfiguration": {OVERRIDES_KEY: overrides_value(overrides)}},
    }
    return yaml.safe_dump(patch, sort_keys=False)


@dataclass(frozen=True)
class Change:
    """One vertex whose parallelism the plan changes."""

    operator: str
    vertex_id: str
    current: int
    target: int


def changes(plan: Decision, running: Scrape) -> list[Change]:
    """Vertices whose running parallelism differs from the plan's."""
    render_overrides(plan, running)  # checks every operator is a vertex
    return [
        Change(op, running.vertices[op][0], running.vertices[op][1], p)
        for op, p in target_parallelism(plan).items()
        if running.vertices[op][1] != p
    ]


def format_changes(found: list[Change]) -> str:
    """The dry-run text: one line per changed vertex, or that nothing changes."""
    if not found:
        return "no change: the running job already has the plan's parallelism"
    return "\n".join(
        f"{c.operator} ({c.vertex_id}): parallelism {c.current} -> {c.target}" for c in found
    )


@dataclass(frozen=True)
class Applied:
    """What ``apply`` did: the plan, the changes, the overrides and the measured downtime."""

    plan_id: str
    at: str
    changes: list[dict]
    overrides: dict[str, int]
    downtime_s: float
    predicted_downtime_s: float | None


def apply_plan(job: FlinkJob, plan, record_dir: Path) -> Applied:
    """Restart ``job`` with the plan's overrides (nothing if no vertex changes) and write the
    record to ``record_dir/<plan_id>.json``; returns it."""
    running = scrape(job.rest, job.job_id)
    found = changes(plan, running)
    overrides = {**job.spec.overrides, **render_overrides(plan, running)}
    downtime = 0.0
    if found:
        spec = JobSpec(**{**asdict(job.spec), "overrides": overrides})
        downtime = job.restart(spec)
    applied = Applied(plan.plan_id, datetime.now(UTC).isoformat(), [asdict(c) for c in found],
                      overrides, downtime, plan.predicted.downtime_s)
    atomic_write(record_dir / f"{plan.plan_id}.json", json.dumps(asdict(applied), indent=2))
    return applied
