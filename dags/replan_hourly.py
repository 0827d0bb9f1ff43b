"""replan_hourly: fit → plan → publish for each app, and measure the plan that was live
during the hour against the telemetry that arrived in it.

Scheduled on the hour-closed asset of ``telemetry_ingest`` (updated by the ingest run whose
10-minute period ends on the hour) or at the top of every hour (``AssetOrTimeSchedule``). Whatever triggered it, a run works on the last complete hour
before its ``data_interval_end`` (``run_after`` for asset-triggered runs, which have no data
interval): the hourly run may race the hour's last ingest batch, and the asset-triggered
run after that batch re-plans the same hour with all its data (same plan id, same MLflow
run). Every task is idempotent for its hour (see ``streamplan.orchestration``).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow.sdk import (
    Asset,
    AssetOrTimeSchedule,
    CronTriggerTimetable,
    dag,
    task,
)
from airflow.sdk.exceptions import AirflowFailException

from streamplan import orchestration

HOUR_CLOSED = Asset(name="streamplan.silver.hour_closed",
                    uri=orchestration.hour_closed_asset_uri(), group="streamplan")


@dag(
    dag_id="replan_hourly",
    schedule=AssetOrTimeSchedule(
        timetable=CronTriggerTimetable("0 * * * *", timezone="UTC", interval=timedelta(hours=1)),
        assets=HOUR_CLOSED,
    ),
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(seconds=20),
                  "execution_timeout": timedelta(minutes=30)},
    tags=["streamplan"],
    doc_md=__doc__,
)
def replan_hourly():
    @task
    def apps() -> list[str]:
        return orchestration.configured_apps()

    @task
    def measure(config_path: str, data_interval_end=None, dag_run=None) -> dict:
        return orchestration.measure(config_path, data_interval_end, dag_run.run_after)

    @task
    def fit(config_path: str, data_interval_end=None, dag_run=None) -> dict:
        return orchestration.fit(config_path, data_interval_end, dag_run.run_after)

    @task
    def plan(fitted: dict) -> dict:
        return orchestration.plan(fitted["config_path"], fitted["model_path"])

    @task
    def publish(planned: dict) -> dict:
        try:
            return orchestration.publish(planned["plan_path"])
        except orchestration.PlanNotPublished as exc:
            raise AirflowFailException(str(exc)) from exc  # re-solving gives the same plan

    configs = apps()
    measure.expand(config_path=configs)
    publish.expand(planned=plan.expand(fitted=fit.expand(config_path=configs)))


replan_hourly()
