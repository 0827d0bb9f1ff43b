"""One replan of a Flink job through the pipeline: collect → ingest → validate → fit →
plan (with the guardrails' state) → publish, and the guardrails' next state."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from streamplan import stages
from streamplan.config import AppConfig, MethodSpec
from streamplan.flink.rest import FlinkRest, Problem, collect
from streamplan.guardrails import GuardState, next_state, state_params
from streamplan.plan import Plan
from streamplan.publish import PublishResult
from streamplan.settings import Settings


@dataclass(frozen=True)
class Replan:
    """What one replan did."""

    interval: stages.Interval
    problems: list[list[Problem]]  # per collected window
    quarantined: int
    plan: Plan
    published: PublishResult
    state: GuardState


def node_info(config: AppConfig) -> dict[str, dict[str, Any]]:
    """The config's nodes in order, as deployment-record entries."""
    return {
        n.name: {"type": n.type, "leased_at": None,
                 "billing_unit_s": config.node_type(n.name).billing_unit_s}
        for n in config.nodes
    }


def replan(spark, settings: Settings, config: AppConfig, rest: FlinkRest, job_id: str,
           state: GuardState, windows: int = 2, extra_windows: int = 2) -> Replan:
    """Collect ``windows`` clean telemetry windows of ``config.window_s`` from the job (a
    window with problems, such as a restarted job's first seconds, is landed for validation
    to quarantine and followed by another, up to ``extra_windows`` more), run them through
    the pipeline and publish the guarded plan (a plan that is not feasible, or lacks
    telemetry for an operator, is not published; the previous one stays current)."""
    start = datetime.now(UTC) - timedelta(seconds=1)
    ops = [o.name for o in config.operators]
    landing = stages.landing_dir(settings, config.app)
    problems: list[list[Problem]] = []
    clean, budget = 0, windows + extra_windows
    while clean < windows and budget > 0:
        found = collect(rest, config.app, ops, node_info(config), config.window_s, landing,
                        job_id)[1]
        problems.append(found)
        clean, budget = clean + (not found), budget - 1
    interval = stages.Interval(start, datetime.now(UTC) + timedelta(seconds=1))
    stages.run_ingest(spark, settings, config, interval)
    report = stages.run_validate(spark, settings, config, interval)
    model = stages.run_fit(spark, settings, config, interval)
    params = {**config.method.params, "guard_state": state_params(state)}
    method = MethodSpec(name=config.method.name, params=params)
    guarded = config.model_copy(update={"method": method})
    plan = stages.run_plan(settings, guarded, model, interval)
    published = stages.run_publish(settings, plan)
    if stages.unfitted_operators(config, model):  # no plan was made, nothing recommended
        return Replan(interval, problems, report.quarantined, plan, published, state)
    new_state = next_state(model, config, params, published.became_current)
    return Replan(interval, problems, report.quarantined, plan, published, new_state)
