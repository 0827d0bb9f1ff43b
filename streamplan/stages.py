"""The loop's stages as plain functions: what the CLI and the Airflow DAGs call.

Each stage takes settings, the app config and the data interval, does one job and returns a
small report. Re-running a stage for the same interval gives the same tables and plan.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from streamplan.config import AppConfig
from streamplan.fitted import FittedModel
from streamplan.plan import Decision, Plan, PlanInputs, Prediction, SolverStats
from streamplan.publish import PublishResult, atomic_write, current_plan, publish
from streamplan.settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Interval:
    """A data interval (start, end]; telemetry windows are stamped with their end."""

    start: datetime
    end: datetime

    @property
    def tag(self) -> str:
        return self.end.strftime("%Y%m%dT%H%M%SZ")

    def next(self) -> Interval:
        """The interval of the same length right after this one."""
        return Interval(self.end, self.end + (self.end - self.start))


@dataclass
class ValidateReport:
    """What the validate stage did for one batch."""

    rows_in: int
    silver: dict[str, int]
    quarantined: int
    rules: dict[str, int]
    report_path: Path | None
    ge_counts: dict[str, dict[str, int]] = field(default_factory=dict)


@contextmanager
def spark_session(settings: Settings) -> Iterator:
    """A Delta-enabled Spark session; stopped at the end unless it was already running
    (a session owned by the caller, e.g. a test fixture or a notebook, is left alone)."""
    from pyspark.sql import SparkSession

    from pipelines.spark import get_spark

    owned = SparkSession.getActiveSession() is None
    spark = get_spark(settings)
    try:
        yield spark
    finally:
        if owned:
            spark.stop()


def landing_dir(settings: Settings, app: str) -> Path:
    """Where raw telemetry files of ``app`` arrive."""
    return settings.landing / app


def simulate_telemetry(
    settings: Settings,
    config: AppConfig,
    placement: dict[str, list[tuple[str, int]]],
    node_types: dict[str, str],
    interval: Interval,
    offset_s: float,
) -> Path:
    """Simulate ``interval`` under ``placement`` and land it as one NDJSON file."""
    from streamplan.simulation import simulate, write_ndjson

    duration = (interval.end - interval.start).total_seconds()
    result = simulate(
        config, placement, node_types, interval.start, duration, workload_offset_s=offset_s
    )
    return write_ndjson(
        result.records, landing_dir(settings, config.app) / f"sim-{interval.tag}.ndjson"
    )


def run_ingest(spark, settings: Settings, config: AppConfig, interval: Interval):
    """Landing → bronze for new files."""
    from pipelines.ingest import ingest_landing

    directory = landing_dir(settings, config.app)
    directory.mkdir(parents=True, exist_ok=True)
    return ingest_landing(spark, directory, settings.lake, config.app, f"{config.app}-{interval.tag}")


def known_nodes(
    settings: Settings, config: AppConfig, declared: dict[str, str] | None = None
) -> dict[str, int]:
    """Nodes telemetry may name, with their cores: the config's, every published plan's, and
    those ``declared`` (node -> type) by deployment records whose type the config knows (a
    VM leased by a policy running outside the pipeline, as in a replay)."""
    cores = {t.name: t.cores for t in config.node_types}
    nodes = {n.name: cores[n.type] for n in config.nodes}
    for path in sorted((settings.publish_dir / config.app / "plans").glob("*.json")):
        plan = Plan.model_validate_json(path.read_text())
        for node, node_type in plan.node_types.items():
            nodes.setdefault(node, cores.get(node_type, max(cores.values())))
    for node, node_type in sorted((declared or {}).items()):
        if node_type in cores:
            nodes.setdefault(node, cores[node_type])
    return nodes


def declared_nodes(deployments) -> dict[str, str]:
    """Node -> type of every node the deployment records of a (small) DataFrame list."""
    if deployments is None:
        return {}
    out: dict[str, str] = {}
    for row in deployments.select("nodes").collect():
        for node, state in json.loads(row["nodes"] or "{}").items():
            if isinstance(state, dict) and isinstance(state.get("type"), str):
                out.setdefault(node, state["type"])
    return out


def validation_context(settings: Settings, config: AppConfig, start: datetime, end: datetime,
                       candidates: dict):
    """What the suites check rows of (start, end] against: the config's operators and
    queries, the known nodes (:func:`known_nodes`, with those the candidate deployment
    records declare) and their cores."""
    from expectations.suites import ValidationContext

    nodes = known_nodes(settings, config, declared_nodes(candidates.get("deployments")))
    return ValidationContext(
        known_operators=frozenset(o.name for o in config.operators),
        known_queries=frozenset(q.name for q in config.queries),
        known_nodes=frozenset(nodes),
        node_cores=nodes,
        interval_start=start,
        interval_end=end,
    )


def run_validate(spark, settings: Settings, config: AppConfig, interval: Interval) -> ValidateReport:
    """Pending bronze rows → parse → Great Expectations → silver MERGE + quarantine."""
    from pipelines.parse import parse_bronze
    from pipelines.promote import pending_bronze, promote
    from pipelines.validate import validate_candidates

    bronze = pending_bronze(spark, settings.lake, config.app).localCheckpoint(eager=True)
    if bronze.isEmpty():
        return ValidateReport(rows_in=0, silver={}, quarantined=0, rules={}, report_path=None)
    batch_id = f"{config.app}-{interval.tag}"
    candidates, failures = parse_bronze(bronze, config.app)
    # materialise once: GE, duplicate detection and the MERGEs all read these small frames
    candidates = {name: df.localCheckpoint(eager=True) for name, df in candidates.items()}
    candidates = {name: df for name, df in candidates.items() if not df.isEmpty()}
    failures = failures.localCheckpoint(eager=True)
    ctx = validation_context(settings, config, interval.start, interval.end, candidates)
    outcome = validate_candidates(spark, candidates, ctx, settings.reports, batch_id)
    failures = failures.unionByName(outcome.failures.select(*failures.columns))
    report = promote(spark, settings.lake, bronze, candidates, failures, batch_id)
    accounted = sum(report.silver.values()) + report.quarantined
    if accounted != report.rows_in:
        raise RuntimeError(
            f"row accounting broken for batch {batch_id}: {report.rows_in} pending bronze rows, "
            f"{accounted} in silver + quarantine"
        )
    return ValidateReport(
        rows_in=report.rows_in,
        silver=report.silver,
        quarantined=report.quarantined,
        rules=report.rules,
        report_path=outcome.report_path,
        ge_counts=outcome.counts,
    )


def model_path(settings: Settings, model_id: str) -> Path:
    """Where a fitted model's JSON lives."""
    return settings.home / "models" / f"{model_id}.json"


def run_fit(
    spark, settings: Settings, config: AppConfig, interval: Interval, model_suffix: str = ""
) -> FittedModel:
    """Silver (interval) → fitted model in gold and as JSON for the optimizers; the model id
    gets ``model_suffix`` (e.g. ``-24h`` for the nightly long-window refit)."""
    from pipelines.fit import fit_model, write_gold

    model = fit_model(spark, settings.lake, config, interval.start, interval.end)
    if model_suffix:
        model = model.model_copy(update={"model_id": f"{model.model_id}{model_suffix}"})
    gold = write_gold(spark, settings.lake, model)
    model = model.model_copy(update={"delta_versions": {**model.delta_versions, **gold}})
    atomic_write(model_path(settings, model.model_id), model.model_dump_json(indent=2))
    return model


def plan_path(settings: Settings, app: str, plan_id: str) -> Path:
    """Where a (not yet published) plan is kept."""
    return settings.home / "plans" / app / f"{plan_id}.json"


def run_plan(
    settings: Settings,
    config: AppConfig,
    model: FittedModel,
    interval: Interval,
    extra_artifacts: dict[str, Path] | None = None,
) -> Plan:
    """Fitted model → method's decision → plan, logged to MLflow and saved (not published)."""
    from optimizers.registry import run_method
    from streamplan.corrections import apply_correction, correction_at, correction_tag
    from streamplan.guardrails import next_state, save_state
    from streamplan.tracking import log_plan

    # scheduled replans keep the guardrails' state here; a caller passing one keeps its own
    params = config.method.params
    keeps_state = "guardrails" in params and "guard_state" not in params
    planning = with_guard_state(settings, config, interval.start) if keeps_state else config
    unfitted = unfitted_operators(config, model)
    decision = unplanned(unfitted) if unfitted else run_method(model, planning)
    stored = correction_at(settings, config.app, interval.start)
    if config.fit.correct_predictions and decision.feasible and stored is not None:
        if stored.correction.applied:
            decision = apply_correction(decision, config, stored.correction)
        else:
            log.info("app %s: predictions uncorrected: %s", config.app, stored.correction.reason)
    previous = current_plan(settings.publish_dir, config.app)
    plan = Plan.from_decision(
        decision,
        app=config.app,
        method=config.method.name,
        inputs=PlanInputs(
            delta_versions=model.delta_versions,
            fitted_model_id=model.model_id,
            config_hash=config.config_hash(),
            interval_start=interval.start.isoformat(),
            interval_end=interval.end.isoformat(),
        ),
        created_at=interval.end.isoformat(),
    )
    if previous is not None:
        # re-planning the interval of the live plan keeps that plan's predecessor
        same = previous.plan_id == plan.plan_id
        plan.previous_plan_id = previous.previous_plan_id if same else previous.plan_id
    tags = {"streamplan.correction": correction_tag(stored)} if stored is not None else None
    run_id = log_plan(settings, config, model, plan, extra_artifacts, tags)
    if keeps_state and not unfitted:
        after = next_state(model, planning, planning.method.params, plan.feasible)
        save_state(settings, config.app, interval.end, after)
    plan = plan.model_copy(update={"mlflow_run_id": run_id})
    atomic_write(plan_path(settings, config.app, plan.plan_id), plan.to_json())
    return plan


def unfitted_operators(config: AppConfig, model: FittedModel) -> list[str]:
    """Configured operators an operator-level model lacks (all their rows quarantined);
    empty for a query-level model (no operator telemetry at all)."""
    if not model.operators:
        return []
    return sorted({o.name for o in config.operators} - set(model.operators))


def with_guard_state(settings: Settings, config: AppConfig, at: datetime) -> AppConfig:
    """``config`` with the guardrails' state kept for the replan at ``at`` in its method's
    params."""
    from streamplan.guardrails import state_at, state_params

    state = state_params(state_at(settings, config.app, at))
    params = {**config.method.params, "guard_state": state}
    return config.model_copy(update={"method": config.method.model_copy(update={"params": params})})


def unplanned(operators: list[str]) -> Decision:
    """A plan that is not made (status ``error``, so never published) because the interval
    has no valid telemetry for ``operators``: a plan without them would drop them."""
    return Decision(
        placement={}, nodes={}, predicted=Prediction(),
        solver=SolverStats(name="fit", status="error", time_s=0.0,
                           message=f"no valid telemetry for operators {operators} in the "
                                   "interval (see the quarantine table); the current plan stays"),
    )


def run_publish(settings: Settings, plan: Plan) -> PublishResult:
    """Publish atomically; a feasible plan becomes current and is marked live in MLflow."""
    from streamplan.tracking import mark_live

    result = publish(plan, settings.publish_dir)
    if result.became_current and plan.mlflow_run_id:
        mark_live(settings, plan.app, plan.mlflow_run_id)
    return result


def run_measure(
    spark, settings: Settings, config: AppConfig, plan: Plan, interval: Interval
) -> dict[str, float]:
    """Measure ``plan`` over ``interval`` (the one after it was made): telemetry that arrived
    (simulated under the plan when ``config.simulation`` is set), ingested like any other,
    then :func:`measure_plan`."""
    if config.simulation is not None:
        placement = {op: [(e.node, e.replicas) for e in es] for op, es in plan.placement.items()}
        types = {**{n.name: n.type for n in config.nodes}, **plan.node_types}
        offset = (interval.start - workload_epoch(settings, config)).total_seconds()
        simulate_telemetry(settings, config, placement, types, interval, offset)
    run_ingest(spark, settings, config, interval)
    run_validate(spark, settings, config, interval)
    return measure_plan(spark, settings, config, plan, interval)


def measure_plan(
    spark, settings: Settings, config: AppConfig, plan: Plan, interval: Interval
) -> dict[str, float]:
    """Measured RT per query of ``plan`` from the silver telemetry of ``interval``: into gold
    ``plans_measured`` and the plan's MLflow run with a predicted-vs-measured plot; queries
    measured above ``(1 + fit.deviation_tolerance)`` × predicted are logged as warnings and
    tagged on the run. Empty (nothing recorded) when the interval has no query telemetry."""
    from optimizers.prediction.deviation import deviations
    from streamplan.corrections import query_utilisations
    from pipelines.measure import measured_response_times, record_measurement
    from streamplan.plots import predicted_vs_measured
    from streamplan.tracking import log_measurement

    measured = measured_response_times(
        spark, settings.lake, config.app, interval.start, interval.end
    )
    if not measured:
        return {}
    predicted = plan.predicted.response_time_ms
    extra = plan.predicted.extra
    uncorrected = {q: extra.get(f"uncorrected_rt_ms.{q}", ms) for q, ms in predicted.items()}
    record_measurement(spark, settings.lake, plan.plan_id, config.app, measured, predicted,
                       interval.end, uncorrected, query_utilisations(plan, config))
    plot = predicted_vs_measured(
        predicted,
        measured,
        {q.name: q.target_rt_ms for q in config.queries},
        f"{plan.plan_id}: predicted vs measured",
        settings.reports / f"predicted-vs-measured-{plan.plan_id}.png",
    )
    late = [d.message() for d in deviations(predicted, measured,
                                             config.fit.deviation_tolerance)]
    for line in late:
        log.warning("plan %s: %s", plan.plan_id, line)
    if plan.mlflow_run_id:
        log_measurement(settings, plan.mlflow_run_id, measured, predicted, plot, late)
    return measured


def workload_epoch(settings: Settings, config: AppConfig) -> datetime:
    """Start of the simulated workload timeline (first simulated interval of the app)."""
    marker = settings.home / "simulation" / f"{config.app}.json"
    return datetime.fromisoformat(json.loads(marker.read_text())["epoch"])


def set_workload_epoch(settings: Settings, config: AppConfig, epoch: datetime) -> None:
    """Record where the simulated workload timeline starts (once per app and home)."""
    marker = settings.home / "simulation" / f"{config.app}.json"
    if not marker.exists():
        atomic_write(marker, json.dumps({"epoch": epoch.isoformat()}))

