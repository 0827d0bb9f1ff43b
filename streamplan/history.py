"""Plan history from MLflow: what auditors browse."""

from __future__ import annotations

from dataclasses import dataclass

from streamplan.settings import Settings
from streamplan.tracking import TAG_LIVE, TAG_PLAN_ID, client, experiment_id


@dataclass(frozen=True)
class PlanRecord:
    """One plan as MLflow remembers it."""

    run_id: str
    plan_id: str
    interval_end: str
    method: str
    status: str
    objective: float | None
    predicted_ms: dict[str, float]
    measured_ms: dict[str, float]
    live: bool


def plan_history(settings: Settings, app: str, limit: int = 20) -> list[PlanRecord]:
    """Plans of ``app``, newest interval first."""
    runs = client(settings).search_runs(
        [experiment_id(settings, app)],
        filter_string=f"tags.`{TAG_PLAN_ID}` != ''",
        order_by=["tags.`streamplan.interval_end` DESC"],
        max_results=limit,
    )
    out = []
    for run in runs:
        m = run.data.metrics
        out.append(
            PlanRecord(
                run_id=run.info.run_id,
                plan_id=run.data.tags[TAG_PLAN_ID],
                interval_end=run.data.tags.get("streamplan.interval_end", ""),
                method=run.data.params.get("method", ""),
                status=run.data.tags.get("streamplan.status", ""),
                objective=m.get("objective"),
                predicted_ms=_prefixed(m, "predicted_rt_ms."),
                measured_ms=_prefixed(m, "measured_rt_ms."),
                live=run.data.tags.get(TAG_LIVE) == "true",
            )
        )
    return out


def _prefixed(metrics: dict[str, float], prefix: str) -> dict[str, float]:
    return {k[len(prefix):]: v for k, v in metrics.items() if k.startswith(prefix)}
