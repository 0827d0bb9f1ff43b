"""telemetry_ingest: every 10 minutes, land → bronze → validate → silver for each app.

Apps come from ``$STREAMPLAN_APPS`` (comma-separated config paths, default
``configs/demo.yaml``), read when the run starts. An app whose config has a ``simulation``
section gets its period simulated into the landing directory first (the stand-in for real
sources). The validate task publishes the silver tables as Airflow assets; when the period
ends on a full hour, ``hour_closed`` also updates the hour-closed asset, which is what
``replan_hourly`` is scheduled on (besides its hourly cron). Every task works on the 10-minute period ending at the run's
``data_interval_end`` and is idempotent for it (see ``streamplan.orchestration``).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow.sdk import Asset, CronTriggerTimetable, dag, task

from streamplan import orchestration

SILVER_ASSETS = [
    Asset(name=f"streamplan.silver.{table}", uri=orchestration.silver_asset_uri(table),
          group="streamplan")
    for table in orchestration.SILVER_ASSET_TABLES
]
HOUR_CLOSED = Asset(name="streamplan.silver.hour_closed",
                    uri=orchestration.hour_closed_asset_uri(), group="streamplan")


@dag(
    dag_id="telemetry_ingest",
    schedule=CronTriggerTimetable("*/10 * * * *", timezone="UTC", interval=timedelta(minutes=10)),
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(seconds=20),
                  "execution_timeout": timedelta(minutes=20)},
    tags=["streamplan"],
    doc_md=__doc__,
)
def telemetry_ingest():
    @task
    def apps() -> list[str]:
        return orchestration.configured_apps()

    @task
    def simulate(config_path: str, data_interval_end=None, dag_run=None) -> dict:
        return orchestration.simulate(config_path, data_interval_end, dag_run.run_after)

    @task
    def ingest(landed: dict, data_interval_end=None, dag_run=None) -> dict:
        return orchestration.ingest(landed["config_path"], data_interval_end, dag_run.run_after)

    @task(outlets=SILVER_ASSETS)
    def validate(ingested: dict, data_interval_end=None, dag_run=None) -> dict:
        return orchestration.validate(ingested["config_path"], data_interval_end,
                                      dag_run.run_after)

    @task.short_circuit
    def period_closes_hour(validated: list[dict], data_interval_end=None, dag_run=None) -> bool:
        return orchestration.closes_hour(data_interval_end, dag_run.run_after)

    @task(outlets=[HOUR_CLOSED])
    def hour_closed() -> None:
        """Marks the hour's telemetry complete (the asset event is the output)."""

    landed = simulate.expand(config_path=apps())
    validated = validate.expand(ingested=ingest.expand(landed=landed))
    period_closes_hour(validated) >> hour_closed()


telemetry_ingest()
