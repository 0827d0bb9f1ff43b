"""MLflow: one experiment per app, one run per plan (idempotent by plan id), measurements
logged into the same run, and a live-plan marker so "which plan was live when" is one query."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import mlflow
from mlflow.entities import Run
from mlflow.tracking import MlflowClient

from streamplan.config import AppConfig
from streamplan.fitted import FittedModel
from streamplan.plan import Plan
from streamplan.settings import Settings

TAG_PLAN_ID = "streamplan.plan_id"
TAG_LIVE = "streamplan.live"
TAG_PUBLISHED_AT = "streamplan.published_at"
TAG_SUPERSEDED_AT = "streamplan.superseded_at"


def experiment_name(app: str) -> str:
    """The MLflow experiment of an application."""
    return f"streamplan-{app}"


class TrackingUnavailable(RuntimeError):
    """The configured MLflow tracking server does not answer."""


def check_server(uri: str, timeout_s: float = 10.0) -> None:
    """For an ``http(s)`` tracking URI: raise :class:`TrackingUnavailable` naming the URI
    unless its ``/health`` answers within ``timeout_s`` (MLflow's own client would retry for
    minutes; the caller's retry policy, e.g. Airflow's, decides what happens next)."""
    if not uri.startswith(("http://", "https://")):
        return
    import httpx

    try:
        response = httpx.get(f"{uri.rstrip('/')}/health", timeout=timeout_s)
    except httpx.HTTPError as exc:
        raise TrackingUnavailable(
            f"MLflow tracking server {uri} (STREAMPLAN_MLFLOW_URI) is unreachable: {exc!r}; "
            "nothing was logged or published"
        ) from exc
    if response.status_code != 200:
        raise TrackingUnavailable(
            f"MLflow tracking server {uri} is unhealthy: /health answered HTTP "
            f"{response.status_code}; nothing was logged or published"
        )


def client(settings: Settings) -> MlflowClient:
    """A client on the configured tracking store (SQLite under home by default); a server
    URI is checked to answer first."""
    settings.home.mkdir(parents=True, exist_ok=True)
    check_server(settings.tracking_uri)
    mlflow.set_tracking_uri(settings.tracking_uri)
    return MlflowClient(settings.tracking_uri)


def experiment_id(settings: Settings, app: str) -> str:
    """Get or create the app's experiment, artifacts under home unless a server decides."""
    c = client(settings)
    exp = c.get_experiment_by_name(experiment_name(app))
    if exp is not None:
        return exp.experiment_id
    location = settings.artifact_root if settings.mlflow_tracking_uri is None else None
    return c.create_experiment(experiment_name(app), artifact_location=location)


def find_plan_run(settings: Settings, app: str, plan_id: str) -> Run | None:
    """The run that already holds ``plan_id`` (re-planning an interval reuses it)."""
    runs = client(settings).search_runs(
        [experiment_id(settings, app)], filter_string=f"tags.`{TAG_PLAN_ID}` = '{plan_id}'"
    )
    return runs[0] if runs else None


def _flat(prefix: str, values: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in values.items():
        if isinstance(v, dict):
            out.update(_flat(f"{prefix}{k}.", v))
        else:
            out[f"{prefix}{k}"] = v
    return out


def plan_metrics(plan: Plan) -> dict[str, float]:
    """Numbers worth a chart: objective, solver figures, predictions per query and node."""
    m: dict[str, float] = {"solver_time_s": plan.solver.time_s}
    for name in ("objective", "gap", "bound"):
        value = getattr(plan.solver, name)
        if value is not None:
            m[name] = float(value)
    m.update({f"solver.{k}": float(v) for k, v in plan.solver.extra.items()})
    m.update({f"predicted_rt_ms.{q}": v for q, v in plan.predicted.response_time_ms.items()})
    m.update({f"predicted_util.{n}": v for n, v in plan.predicted.node_utilisation.items()})
    if plan.predicted.cost_per_hour is not None:
        m["cost_per_hour"] = plan.predicted.cost_per_hour
    actions = list(plan.nodes.values())
    m.update({f"nodes_{a}": float(actions.count(a)) for a in ("keep", "hire", "release")})
    return {k: float(v) for k, v in m.items() if v is not None and v == v and abs(v) != float("inf")}


def log_plan(
    settings: Settings,
    config: AppConfig,
    model: FittedModel,
    plan: Plan,
    artifacts: dict[str, Path] | None = None,
    tags: dict[str, str] | None = None,
) -> str:
    """Log a plan: params, metrics, tags (plus ``tags``), plan JSON, fitted model, extra
    files. Returns run id."""
    exp = experiment_id(settings, plan.app)
    existing = find_plan_run(settings, plan.app, plan.plan_id)
    run_id = existing.info.run_id if existing else None
    with mlflow.start_run(experiment_id=exp, run_id=run_id, run_name=plan.plan_id) as run:
        params = {
            "method": plan.method,
            "config_hash": plan.inputs.config_hash,
            "interval_start": plan.inputs.interval_start,
            "interval_end": plan.inputs.interval_end,
            "fitted_model_id": plan.inputs.fitted_model_id,
            "rate_statistic": model.rate_statistic,
            **_flat("param.", config.method.params),
        }
        if existing is None:
            mlflow.log_params({k: str(v)[:500] for k, v in params.items()})
        mlflow.log_metrics(plan_metrics(plan))
        mlflow.set_tags(
            {
                TAG_PLAN_ID: plan.plan_id,
                "streamplan.app": plan.app,
                "streamplan.status": plan.solver.status,
                "streamplan.feasible": str(plan.feasible).lower(),
                "streamplan.interval_end": plan.inputs.interval_end,
                **{f"delta.{k}": str(v) for k, v in plan.inputs.delta_versions.items()},
                **(tags or {}),
            }
        )
        if plan.solver.message:
            mlflow.set_tag("streamplan.message", plan.solver.message[:5000])
        plan = plan.model_copy(update={"mlflow_run_id": run.info.run_id})
        mlflow.log_dict(plan.model_dump(mode="json", by_alias=True), "plan/plan.json")
        mlflow.log_dict(model.model_dump(mode="json"), "model/fitted_model.json")
        for subdir, path in (artifacts or {}).items():
            if path and Path(path).exists():
                mlflow.log_artifact(str(path), subdir)
        return run.info.run_id


def mark_live(settings: Settings, app: str, run_id: str) -> None:
    """Tag ``run_id`` as the live plan and close the previous live one."""
    c = client(settings)
    now = datetime.now(UTC).isoformat(timespec="seconds")
    live = c.search_runs([experiment_id(settings, app)], filter_string=f"tags.`{TAG_LIVE}` = 'true'")
    for run in live:
        if run.info.run_id != run_id:
            c.set_tag(run.info.run_id, TAG_LIVE, "false")
            c.set_tag(run.info.run_id, TAG_SUPERSEDED_AT, now)
    c.set_tag(run_id, TAG_LIVE, "true")
    c.set_tag(run_id, TAG_PUBLISHED_AT, now)


def log_measurement(
    settings: Settings,
    run_id: str,
    measured_ms: dict[str, float],
    predicted_ms: dict[str, float],
    plot: Path | None,
    deviations: list[str] | None = None,
) -> dict[str, float]:
    """Log measured RT per query and the error (predicted − measured) into the plan's run;
    ``deviations`` (one line per query measured above its prediction's tolerance) go into
    the tag ``streamplan.deviation``."""
    metrics: dict[str, float] = {}
    for q, measured in measured_ms.items():
        metrics[f"measured_rt_ms.{q}"] = measured
        if q in predicted_ms and measured > 0:
            metrics[f"rt_error_ms.{q}"] = predicted_ms[q] - measured
            metrics[f"rt_rel_error.{q}"] = (predicted_ms[q] - measured) / measured
    c = client(settings)
    for k, v in metrics.items():
        c.log_metric(run_id, k, v)
    c.set_tag(run_id, "streamplan.measured", "true")
    c.set_tag(run_id, "streamplan.deviation", "; ".join(deviations or []) or "none")
    if plot is not None:
        c.log_artifact(run_id, str(plot), "plots")
    return metrics


def run_url(settings: Settings, app: str, run_id: str) -> str:
    """Where to look: the run's path in `mlflow ui`."""
    return f"{settings.tracking_uri}  (experiment {experiment_name(app)}, run {run_id})"
