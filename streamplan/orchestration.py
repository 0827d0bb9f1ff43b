"""Task functions the Airflow DAGs call: one function per task, plain arguments in, small
JSON-able dicts out (paths, ids, versions, counts), so only small values travel through XCom.

Every function works on one *period* of its DAG (10 minutes for ``telemetry_ingest``, one
hour for ``replan_hourly``, one day for ``recalibrate_nightly``): the period ending at the
last period boundary at or before the run's ``data_interval_end`` (``run_after`` for runs
without a data interval, e.g. asset-triggered ones). A run, its retries, a re-run and a
backfill of the same period therefore read and write exactly the same data:

* the stand-in telemetry source (the simulator) lands one file per period, once;
* ingest skips files already in bronze (content hash), validate MERGEs on natural keys;
* fit, plan and publish derive their ids from the period (same model id, same plan id,
  same MLflow run); publishing an older period never replaces a newer live plan;
* a plan is measured against the telemetry of the hour after it was made, i.e. the
  telemetry that was simulated (or arrived) while it was live.

Nothing here imports Airflow, Spark or MLflow at module level: DAG files import this module
while the scheduler parses them, and parsing must stay cheap.
"""

from __future__ import annotations

import json
import logging
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from streamplan.settings import REPO_ROOT, Settings, load_settings

log = logging.getLogger(__name__)

APPS_ENV = "STREAMPLAN_APPS"
DEFAULT_APPS = "configs/demo.yaml"
RETENTION_ENV = "STREAMPLAN_VACUUM_RETENTION_HOURS"
DEFAULT_RETENTION_HOURS = 168.0

INGEST_PERIOD = timedelta(minutes=10)
REPLAN_PERIOD = timedelta(hours=1)
NIGHTLY_PERIOD = timedelta(days=1)

#: silver tables published as Airflow assets by ``telemetry_ingest`` (pipelines.tables order)
SILVER_ASSET_TABLES = (
    "operator_metrics",
    "query_metrics",
    "node_metrics",
    "link_metrics",
    "deployments",
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class PlanNotPublished(RuntimeError):
    """The period's plan is not feasible: it was filed and logged, ``current.json`` kept."""


# --- apps and periods ------------------------------------------------------------------------
def hour_closed_asset_uri() -> str:
    """Asset ``telemetry_ingest`` updates when its period closes an hour: what
    ``replan_hourly`` waits on (the silver tables change every 10 minutes)."""
    return "x-streamplan://lake/silver/hour-closed"


def closes_hour(
    data_interval_end: datetime | str | None = None, run_after: datetime | str | None = None
) -> bool:
    """Whether the ingest period of this run ends on a full hour.

    >>> closes_hour("2026-01-01T10:00:00Z"), closes_hour("2026-01-01T10:50:00Z")
    (True, False)
    """
    end = period_interval(INGEST_PERIOD, data_interval_end, run_after).end
    return (end - _EPOCH) % REPLAN_PERIOD == timedelta(0)


def silver_asset_uri(table: str) -> str:
    """Stable identifier of a silver table as an Airflow asset (independent of the home)."""
    return f"x-streamplan://lake/silver/{table}"


def app_config_paths(value: str | None = None) -> list[str]:
    """App config paths from ``$STREAMPLAN_APPS`` (comma-separated; relative to the repo root;
    default ``configs/demo.yaml``), absolute."""
    raw = os.environ.get(APPS_ENV, DEFAULT_APPS) if value is None else value
    paths = []
    for item in raw.split(","):
        if item.strip():
            path = Path(item.strip()).expanduser()
            paths.append(str((path if path.is_absolute() else REPO_ROOT / path).resolve()))
    if not paths:
        raise ValueError(f"${APPS_ENV}={raw!r} names no app config")
    return paths


def configured_apps() -> list[str]:
    """The configured apps' config paths, each checked to load (a broken file fails here,
    naming the field, before any data is touched)."""
    from streamplan.config import load_config

    paths = app_config_paths()
    apps: dict[str, str] = {}
    for path in paths:
        app = load_config(path).app
        if app in apps:
            raise ValueError(f"${APPS_ENV}: app {app!r} is configured twice ({apps[app]}, {path})")
        apps[app] = path
    return paths


def _utc(value: datetime | str | None) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    # a plain datetime (pendulum's subclass would leak into isoformat/strftime otherwise)
    return datetime.fromtimestamp(value.timestamp(), UTC)


def period_interval(
    period: timedelta,
    data_interval_end: datetime | str | None = None,
    run_after: datetime | str | None = None,
):
    """The period ending at the last boundary (multiples of ``period`` since the Unix epoch,
    UTC) at or before ``data_interval_end``, or ``run_after`` when the run has no interval.

    >>> i = period_interval(timedelta(hours=1), "2026-01-01T10:20:00Z")
    >>> i.start.isoformat(), i.end.isoformat()
    ('2026-01-01T09:00:00+00:00', '2026-01-01T10:00:00+00:00')
    """
    from streamplan.stages import Interval

    reference = _utc(data_interval_end) or _utc(run_after) or datetime.now(UTC)
    end = reference - (reference - _EPOCH) % period
    return Interval(end - period, end)


def _interval_dict(interval) -> dict[str, str]:
    return {"interval_start": interval.start.isoformat(), "interval_end": interval.end.isoformat()}


def _load(config_path: str):
    from streamplan.config import load_config

    return load_settings(), load_config(config_path)


# --- which plan was live when ------------------------------------------------------------------
def published_plans(settings: Settings, app: str) -> list:
    """Every plan filed under ``<publish>/<app>/plans``, oldest period first."""
    from streamplan.plan import Plan

    plans = [
        Plan.model_validate_json(p.read_text())
        for p in sorted((settings.publish_dir / app / "plans").glob("*.json"))
    ]
    return sorted(plans, key=lambda p: (_utc(p.inputs.interval_end), p.plan_id))


def live_plan_at(settings: Settings, app: str, at: datetime):
    """The plan in force at ``at``: the newest feasible plan made for a period ending at or
    before ``at`` (``None`` before the first one: the config's deployment is in force)."""
    live = [p for p in published_plans(settings, app) if p.feasible
            and _utc(p.inputs.interval_end) <= at]
    return live[-1] if live else None


# --- telemetry_ingest --------------------------------------------------------------------------
def simulate(
    config_path: str,
    data_interval_end: datetime | str | None = None,
    run_after: datetime | str | None = None,
) -> dict[str, Any]:
    """Stand-in source: land the simulated telemetry of the 10-minute period, under the
    deployment in force at its start. Skipped when the app has no ``simulation`` section
    (real sources land files themselves) and when the period's file already landed."""
    from streamplan import stages

    settings, config = _load(config_path)
    interval = period_interval(INGEST_PERIOD, data_interval_end, run_after)
    out: dict[str, Any] = {"app": config.app, "config_path": config_path,
                           **_interval_dict(interval), "landed": None}
    if config.simulation is None:
        return {**out, "reason": "no simulation section: telemetry comes from real sources"}
    target = stages.landing_dir(settings, config.app) / f"sim-{interval.tag}.ndjson"
    if target.exists():
        return {**out, "landed": str(target), "reason": "already landed"}
    stages.set_workload_epoch(settings, config, interval.start)
    # a period backfilled before the recorded epoch replays the start of the timeline
    offset = max(0.0, (interval.start - stages.workload_epoch(settings, config)).total_seconds())
    live = live_plan_at(settings, config.app, interval.start)
    types = {n.name: n.type for n in config.nodes}
    if live is None:
        placement = dict(config.deployment)
    else:
        placement = {op: [(e.node, e.replicas) for e in es] for op, es in live.placement.items()}
        types.update(live.node_types)
    path = stages.simulate_telemetry(settings, config, placement, types, interval, offset)
    return {**out, "landed": str(path), "deployment": live.plan_id if live else "config",
            "reason": "simulated"}


def ingest(
    config_path: str,
    data_interval_end: datetime | str | None = None,
    run_after: datetime | str | None = None,
) -> dict[str, Any]:
    """Landing → bronze (new files only)."""
    from streamplan import stages

    settings, config = _load(config_path)
    interval = period_interval(INGEST_PERIOD, data_interval_end, run_after)
    with stages.spark_session(settings) as spark:
        report = stages.run_ingest(spark, settings, config, interval)
    return {"app": config.app, "config_path": config_path, **_interval_dict(interval),
            "batch_id": report.batch_id, "files_new": len(report.files_new),
            "files_skipped": len(report.files_skipped), "rows_landed": report.rows_landed}


def validate(
    config_path: str,
    data_interval_end: datetime | str | None = None,
    run_after: datetime | str | None = None,
) -> dict[str, Any]:
    """Pending bronze → Great Expectations → silver MERGE + quarantine. With nothing pending
    (a re-run after the batch was promoted) nothing is touched, the batch report included."""
    from pipelines.delta_io import table_exists
    from pipelines.promote import pending_bronze
    from pipelines.tables import bronze_path
    from streamplan import stages

    settings, config = _load(config_path)
    interval = period_interval(INGEST_PERIOD, data_interval_end, run_after)
    out = {"app": config.app, "config_path": config_path, **_interval_dict(interval)}
    report_path = settings.reports / f"validation-{config.app}-{interval.tag}.html"
    with stages.spark_session(settings) as spark:
        if not table_exists(spark, bronze_path(settings.lake)) or pending_bronze(
            spark, settings.lake, config.app
        ).limit(1).count() == 0:
            return {**out, "rows_in": 0, "silver": {}, "quarantined": 0, "rules": {},
                    "report": str(report_path) if report_path.exists() else None}
        report = stages.run_validate(spark, settings, config, interval)
    return {**out, "rows_in": report.rows_in, "silver": dict(report.silver),
            "quarantined": report.quarantined, "rules": dict(report.rules),
            "report": str(report.report_path) if report.report_path else None}


# --- replan_hourly -----------------------------------------------------------------------------
def measure(
    config_path: str,
    data_interval_end: datetime | str | None = None,
    run_after: datetime | str | None = None,
) -> dict[str, Any]:
    """Measure the plan that was live during the hour against the telemetry of that hour:
    measured response time per query into gold ``plans_measured`` and the plan's MLflow run,
    with a predicted-vs-measured plot. Nothing to do before the first plan."""
    from streamplan import stages

    settings, config = _load(config_path)
    interval = period_interval(REPLAN_PERIOD, data_interval_end, run_after)
    out: dict[str, Any] = {"app": config.app, **_interval_dict(interval), "plan_id": None}
    plan = live_plan_at(settings, config.app, interval.start)
    if plan is None:
        return {**out, "reason": "no plan was live during the interval"}
    with stages.spark_session(settings) as spark:
        measured = stages.measure_plan(spark, settings, config, plan, interval)
    out.update(plan_id=plan.plan_id, mlflow_run_id=plan.mlflow_run_id, measured_rt_ms=measured)
    if not measured:
        return {**out, "reason": "no query telemetry in the interval"}
    return {**out, "reason": "measured"}


def fit(
    config_path: str,
    data_interval_end: datetime | str | None = None,
    run_after: datetime | str | None = None,
) -> dict[str, Any]:
    """Silver telemetry of the hour → fitted model (gold + JSON). When the plan measured up
    to the hour's start deviated from its prediction, the correction is refitted now
    (:func:`streamplan.corrections.deviation_trigger`)."""
    from streamplan import stages
    from streamplan.corrections import deviation_trigger

    settings, config = _load(config_path)
    interval = period_interval(REPLAN_PERIOD, data_interval_end, run_after)
    with stages.spark_session(settings) as spark:
        model = stages.run_fit(spark, settings, config, interval)
        late = deviation_trigger(spark, settings, config, interval.start)
    return {"app": config.app, "config_path": config_path, **_interval_dict(interval),
            "model_id": model.model_id, "deviations": late,
            "model_path": str(stages.model_path(settings, model.model_id)),
            "delta_versions": dict(model.delta_versions)}


def plan(config_path: str, model_path: str) -> dict[str, Any]:
    """Fitted model → plan with the app's method, logged to MLflow (not yet published)."""
    from streamplan import stages
    from streamplan.fitted import FittedModel

    settings, config = _load(config_path)
    model = FittedModel.model_validate_json(Path(model_path).read_text())
    interval = stages.Interval(_utc(model.window_start), _utc(model.window_end))
    # the validation report of the period's last ingest batch goes along as evidence
    report = settings.reports / f"validation-{config.app}-{interval.tag}.html"
    artifacts = {"validation": report} if report.exists() else None
    result = stages.run_plan(settings, config, model, interval, artifacts)
    return {"app": config.app, "config_path": config_path, **_interval_dict(interval),
            "plan_id": result.plan_id,
            "plan_path": str(stages.plan_path(settings, config.app, result.plan_id)),
            "mlflow_run_id": result.mlflow_run_id, "status": result.solver.status,
            "feasible": result.feasible, "objective": result.solver.objective}


def publish(plan_path: str) -> dict[str, Any]:
    """Publish the period's plan atomically. A feasible plan becomes ``current.json`` unless a
    plan of a later period is already live (re-running or backfilling an old hour files the
    plan but keeps the newer one live). An infeasible plan is filed, never made current,
    and raises :class:`PlanNotPublished`."""
    from streamplan import stages
    from streamplan.plan import Plan
    from streamplan.publish import atomic_write, current_plan, validate_plan_document

    settings = load_settings()
    new = Plan.model_validate_json(Path(plan_path).read_text())
    live = current_plan(settings.publish_dir, new.app)
    out: dict[str, Any] = {"app": new.app, "plan_id": new.plan_id,
                           "mlflow_run_id": new.mlflow_run_id}
    if not new.feasible:
        result = stages.run_publish(settings, new)
        raise PlanNotPublished(
            f"plan {new.plan_id} not published: {result.reason}; current.json unchanged "
            f"(live: {live.plan_id if live else 'none'}); see MLflow run {new.mlflow_run_id}"
        )
    if live is not None and _utc(live.inputs.interval_end) > _utc(new.inputs.interval_end):
        text = new.to_json()
        validate_plan_document(json.loads(text))
        filed = atomic_write(settings.publish_dir / new.app / "plans" / f"{new.plan_id}.json", text)
        return {**out, "plan_file": str(filed), "became_current": False,
                "reason": f"kept newer live plan {live.plan_id}"}
    result = stages.run_publish(settings, new)
    return {**out, "plan_file": str(result.plan_path), "current": str(result.current_path),
            "became_current": result.became_current, "reason": result.reason}


# --- recalibrate_nightly -----------------------------------------------------------------------
def refit_long_window(
    config_path: str,
    data_interval_end: datetime | str | None = None,
    run_after: datetime | str | None = None,
) -> dict[str, Any]:
    """Refit the model over the whole day (service-time confidence intervals and low-load
    calibration get all the day's windows); stored in gold and as JSON under its own id
    (``<app>-<end>-24h``) and logged to the night's MLflow run."""
    from streamplan import stages
    from streamplan.history_report import log_recalibration

    settings, config = _load(config_path)
    interval = period_interval(NIGHTLY_PERIOD, data_interval_end, run_after)
    hours = round((interval.end - interval.start).total_seconds() / 3600)
    with stages.spark_session(settings) as spark:
        model = stages.run_fit(spark, settings, config, interval, model_suffix=f"-{hours}h")
    path = stages.model_path(settings, model.model_id)
    run_id = log_recalibration(settings, config, model, interval, path)
    with_ci = sum(1 for o in model.operators.values() if o.service_mean_ci is not None)
    return {"app": config.app, "config_path": config_path, **_interval_dict(interval),
            "model_id": model.model_id, "model_path": str(path), "mlflow_run_id": run_id,
            "operators": len(model.operators), "operators_with_ci": with_ci}


def rebuild_validation_report(
    config_path: str,
    data_interval_end: datetime | str | None = None,
    run_after: datetime | str | None = None,
) -> dict[str, Any]:
    """Re-run the silver suites over the day's silver rows and summarise the day's
    quarantine: one HTML report, logged to the night's MLflow run."""
    from pipelines.maintenance import rebuild_validation_report as rebuild
    from streamplan import stages
    from streamplan.history_report import log_nightly_artifact

    settings, config = _load(config_path)
    interval = period_interval(NIGHTLY_PERIOD, data_interval_end, run_after)
    with stages.spark_session(settings) as spark:
        report = rebuild(spark, settings, config, interval.start, interval.end)
    run_id = log_nightly_artifact(settings, config.app, interval, report.path, "validation")
    return {"app": config.app, "config_path": config_path, **_interval_dict(interval),
            "report": str(report.path), "rows": report.rows, "failed_rows": report.failed_rows,
            "quarantined": report.quarantined, "mlflow_run_id": run_id}


def plan_history_report(
    config_path: str,
    data_interval_end: datetime | str | None = None,
    run_after: datetime | str | None = None,
) -> dict[str, Any]:
    """Plans of the day with predicted vs measured response time, as a table and a plot,
    logged to the night's MLflow run."""
    from streamplan.history_report import write_history_report

    settings, config = _load(config_path)
    interval = period_interval(NIGHTLY_PERIOD, data_interval_end, run_after)
    report = write_history_report(settings, config, interval.start, interval.end)
    return {"app": config.app, "config_path": config_path, **_interval_dict(interval),
            "plans": report.plans,
            "measured": report.measured, "table": str(report.table_path),
            "plot": str(report.plot_path), "mlflow_run_id": report.run_id}


def fit_prediction_correction(
    config_path: str,
    data_interval_end: datetime | str | None = None,
    run_after: datetime | str | None = None,
) -> dict[str, Any]:
    """Fit the correction of predicted response times on every (uncorrected prediction,
    measurement, ρ) pair in gold ``plans_measured`` up to the night's end; store it for the
    planner (used from the night's end on) and log it to the night's MLflow run. With too few
    pairs the stored correction is the identity with its reason."""
    from streamplan import stages
    from streamplan.corrections import refit_correction
    from streamplan.history_report import nightly_run_id
    from streamplan.tracking import client

    settings, config = _load(config_path)
    interval = period_interval(NIGHTLY_PERIOD, data_interval_end, run_after)
    with stages.spark_session(settings) as spark:
        correction, path = refit_correction(spark, settings, config, interval.end)
    run_id = nightly_run_id(settings, config.app, interval.start, interval.end)
    c = client(settings)
    for name, value in (("correction.alpha", correction.alpha),
                        ("correction.beta", correction.beta),
                        ("correction.pairs", float(correction.pairs))):
        c.log_metric(run_id, name, value)
    c.set_tag(run_id, "streamplan.correction", correction.reason or "applied")
    if correction.reason:
        log.warning("app %s: %s", config.app, correction.reason)
    return {"app": config.app, "config_path": config_path, **_interval_dict(interval),
            "pairs": correction.pairs, "alpha": correction.alpha, "beta": correction.beta,
            "applied": correction.applied, "reason": correction.reason,
            "correction_path": str(path), "mlflow_run_id": run_id}


def retention_hours(value: float | str | None = None) -> float:
    """VACUUM retention: ``value``, else ``$STREAMPLAN_VACUUM_RETENTION_HOURS``, else 168 h."""
    if value is None or value == "":
        value = os.environ.get(RETENTION_ENV, DEFAULT_RETENTION_HOURS)
    hours = float(value)
    if hours < 0:
        raise ValueError(f"VACUUM retention must be >= 0 hours, got {hours}")
    return hours


def delta_maintenance(vacuum_retention_hours: float | str | None = None) -> dict[str, Any]:
    """OPTIMIZE (compaction) and VACUUM every Delta table of the lake."""
    from pipelines.maintenance import optimize_and_vacuum
    from streamplan import stages

    settings = load_settings()
    hours = retention_hours(vacuum_retention_hours)
    with stages.spark_session(settings) as spark:
        tables = optimize_and_vacuum(spark, settings.lake, hours)
    return {"retention_hours": hours,
            "tables": {t.name: t.as_dict() for t in tables},
            "files_removed": sum(t.files_removed for t in tables)}
