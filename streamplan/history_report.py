"""The nightly report run in MLflow: the day's long-window refit (with confidence intervals),
its data docs, and the plan-history report (plans of the day, predicted vs measured response
time per query, as a table and a plot).

One run per app and night, in the app's experiment, found again by its tag, so re-running a
night overwrites its artifacts instead of adding runs. Nightly runs carry no plan-id tag and
therefore never show up in the plan history itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from streamplan.config import AppConfig
from streamplan.fitted import FittedModel
from streamplan.history import PlanRecord, plan_history
from streamplan.settings import Settings
from streamplan.tracking import client, experiment_id

TAG_NIGHTLY = "streamplan.nightly"
TAG_KIND = "streamplan.kind"
HISTORY_LIMIT = 50_000


def _tag(t: datetime) -> str:
    return t.strftime("%Y%m%dT%H%M%SZ")


def nightly_run_id(settings: Settings, app: str, start: datetime, end: datetime) -> str:
    """The night's report run of ``app`` (created on first use)."""
    c = client(settings)
    exp = experiment_id(settings, app)
    runs = c.search_runs([exp], filter_string=f"tags.`{TAG_NIGHTLY}` = '{_tag(end)}'")
    if runs:
        return runs[0].info.run_id
    run = c.create_run(
        exp,
        run_name=f"nightly-{app}-{_tag(end)}",
        tags={TAG_NIGHTLY: _tag(end), TAG_KIND: "nightly", "streamplan.app": app,
              "streamplan.window_start": start.isoformat(),
              "streamplan.window_end": end.isoformat()},
    )
    c.set_terminated(run.info.run_id)
    return run.info.run_id


def log_nightly_artifact(settings: Settings, app: str, interval, path: Path, subdir: str) -> str:
    """Attach a file to the night's run; returns the run id."""
    run_id = nightly_run_id(settings, app, interval.start, interval.end)
    client(settings).log_artifact(run_id, str(path), subdir)
    return run_id


def recalibration_metrics(model: FittedModel) -> dict[str, float]:
    """Service times (ms) with their 95% confidence bounds, low-load calibration and sample
    counts, per operator and per query."""
    m: dict[str, float] = {}
    for op, om in model.operators.items():
        m[f"service_mean_ms.{op}"] = om.service_mean_s * 1e3
        m[f"service_scv.{op}"] = om.service_scv
        m[f"windows.{op}"] = float(om.samples)
        if om.service_mean_ci is not None:
            m[f"service_mean_ci_low_ms.{op}"] = om.service_mean_ci[0] * 1e3
            m[f"service_mean_ci_high_ms.{op}"] = om.service_mean_ci[1] * 1e3
    for q, qm in model.queries.items():
        m[f"query_service_mean_ms.{q}"] = qm.service_mean_s * 1e3
        m[f"arrival_rate.{q}"] = model.query_rate(q)
        m[f"cal_windows.{q}"] = float(qm.cal_windows)
        if qm.cal_service_mean_s is not None:
            m[f"cal_service_mean_ms.{q}"] = qm.cal_service_mean_s * 1e3
        if qm.measured_rt_ms is not None:
            m[f"measured_rt_ms.{q}"] = qm.measured_rt_ms
    return {k: float(v) for k, v in m.items() if v == v}


def log_recalibration(
    settings: Settings, config: AppConfig, model: FittedModel, interval, model_path: Path
) -> str:
    """Log the long-window model to the night's run: metrics, parameters, the model JSON."""
    run_id = nightly_run_id(settings, config.app, interval.start, interval.end)
    c = client(settings)
    run = c.get_run(run_id)
    params = {"model_id": model.model_id, "rate_statistic": model.rate_statistic,
              "config_hash": config.config_hash(), "service_source": config.fit.service_source}
    new = {k: v for k, v in params.items() if k not in run.data.params}
    for k, v in new.items():
        c.log_param(run_id, k, v)
    for k, v in recalibration_metrics(model).items():
        c.log_metric(run_id, k, v)
    for table, version in model.delta_versions.items():
        c.set_tag(run_id, f"delta.{table}", str(version))
    c.log_artifact(run_id, str(model_path), "model")
    return run_id


@dataclass(frozen=True)
class HistoryReport:
    """What the plan-history report wrote."""

    plans: int
    measured: int
    table_path: Path
    plot_path: Path
    run_id: str


def plans_between(settings: Settings, app: str, start: datetime, end: datetime) -> list[PlanRecord]:
    """Plans made for periods ending in (start, end], oldest first."""
    rows = [
        r for r in plan_history(settings, app, HISTORY_LIMIT)
        if r.interval_end and start < datetime.fromisoformat(r.interval_end) <= end
    ]
    return sorted(rows, key=lambda r: (r.interval_end, r.plan_id))


def history_table(plans: list[PlanRecord], targets: dict[str, float]):
    """One row per plan and query: predicted, measured, error (predicted − measured)."""
    import pandas as pd

    rows = []
    for p in plans:
        for q in sorted(set(p.predicted_ms) | set(p.measured_ms) | set(targets)):
            predicted, measured = p.predicted_ms.get(q), p.measured_ms.get(q)
            error = predicted - measured if predicted is not None and measured else None
            rows.append({
                "interval_end": p.interval_end, "plan_id": p.plan_id, "method": p.method,
                "status": p.status, "live": p.live, "query": q,
                "target_rt_ms": targets.get(q), "predicted_rt_ms": predicted,
                "measured_rt_ms": measured, "error_ms": error,
                "rel_error": error / measured if error is not None else None,
            })
    columns = ["interval_end", "plan_id", "method", "status", "live", "query", "target_rt_ms",
               "predicted_rt_ms", "measured_rt_ms", "error_ms", "rel_error"]
    return pd.DataFrame(rows, columns=columns)


def history_plot(table, title: str, path: Path) -> Path:
    """Predicted (dashed) and measured (solid) mean response time per query over the day."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    fig, ax = plt.subplots(figsize=(8, 4))
    if table.empty:
        ax.text(0.5, 0.5, "no plans in this period", ha="center", va="center",
                transform=ax.transAxes)
    for i, (query, rows) in enumerate(table.groupby("query", sort=True)):
        color = f"C{i % 10}"
        when = pd.to_datetime(rows["interval_end"])
        ax.plot(when, rows["predicted_rt_ms"], "--o", color=color, label=f"{query} predicted")
        measured = rows["measured_rt_ms"].notna()
        if measured.any():
            ax.plot(when[measured], rows["measured_rt_ms"][measured], "-s", color=color,
                    label=f"{query} measured")
        target = rows["target_rt_ms"].dropna()
        if not target.empty:
            ax.axhline(target.iloc[0], color=color, linestyle=":", linewidth=1)
    ax.set_xlabel("plan made at (end of fitted hour, UTC)")
    ax.set_ylabel("mean response time (ms)")
    ax.set_title(title)
    if not table.empty:
        ax.legend(fontsize="x-small", ncol=2)
    fig.autofmt_xdate()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write_history_report(
    settings: Settings, config: AppConfig, start: datetime, end: datetime
) -> HistoryReport:
    """The plan-history report of (start, end]: CSV table and PNG plot under reports, both
    logged to the night's run with summary metrics (plans, measured, mean |relative error|)."""
    plans = plans_between(settings, config.app, start, end)
    table = history_table(plans, {q.name: q.target_rt_ms for q in config.queries})
    stem = f"plan-history-{config.app}-{_tag(end)}"
    table_path = settings.reports / f"{stem}.csv"
    table_path.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(table_path, index=False)
    plot_path = history_plot(table, f"{config.app}: plans of ({start:%Y-%m-%d %H:%M}, "
                             f"{end:%Y-%m-%d %H:%M}] UTC", settings.reports / f"{stem}.png")
    run_id = nightly_run_id(settings, config.app, start, end)
    c = client(settings)
    c.log_artifact(run_id, str(table_path), "history")
    c.log_artifact(run_id, str(plot_path), "history")
    c.log_table(run_id, table, "history/plans.json")
    measured = sum(1 for p in plans if p.measured_ms)
    c.log_metric(run_id, "history.plans", float(len(plans)))
    c.log_metric(run_id, "history.measured", float(measured))
    errors = table.dropna(subset=["rel_error"])
    for query, rows in errors.groupby("query"):
        c.log_metric(run_id, f"history.mean_abs_rel_error.{query}",
                     float(rows["rel_error"].abs().mean()))
    return HistoryReport(len(plans), measured, table_path, plot_path, run_id)
