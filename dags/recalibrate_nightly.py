"""recalibrate_nightly: the day's long-window refit (confidence intervals, low-load
calibration), rebuilt data docs, the plan-history report, the correction of predicted
response times fitted on the measured plans (the planner applies it from the night's end
on), then Delta OPTIMIZE and VACUUM.

Runs at 00:30 UTC on the previous calendar day (the day ending at the last midnight at or
before ``data_interval_end``). The refit, the validation report and the plan history go to
one MLflow run per app and night (``nightly-<app>-<date>``). VACUUM retention: the
``vacuum_retention_hours`` param, else ``$STREAMPLAN_VACUUM_RETENTION_HOURS``, else 168 h;
below 168 h Delta's retention check is turned off for that call, and plans older than the
retention can no longer be re-derived by time travel.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow.sdk import CronTriggerTimetable, Param, dag, task

from streamplan import orchestration


@dag(
    dag_id="recalibrate_nightly",
    schedule=CronTriggerTimetable("30 0 * * *", timezone="UTC", interval=timedelta(days=1)),
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(seconds=30),
                  "execution_timeout": timedelta(hours=2)},
    params={
        "vacuum_retention_hours": Param(
            None, type=["null", "number"], minimum=0,
            description="VACUUM retention (h); empty: $STREAMPLAN_VACUUM_RETENTION_HOURS or 168",
        ),
    },
    tags=["streamplan"],
    doc_md=__doc__,
)
def recalibrate_nightly():
    @task
    def apps() -> list[str]:
        return orchestration.configured_apps()

    @task
    def refit(config_path: str, data_interval_end=None, dag_run=None) -> dict:
        return orchestration.refit_long_window(config_path, data_interval_end,
                                               dag_run.run_after)

    @task
    def validation_report(refitted: dict, data_interval_end=None, dag_run=None) -> dict:
        return orchestration.rebuild_validation_report(refitted["config_path"],
                                                       data_interval_end, dag_run.run_after)

    @task
    def history_report(validated: dict, data_interval_end=None, dag_run=None) -> dict:
        return orchestration.plan_history_report(validated["config_path"], data_interval_end,
                                                 dag_run.run_after)

    @task
    def correction(reported: dict, data_interval_end=None, dag_run=None) -> dict:
        return orchestration.fit_prediction_correction(reported["config_path"],
                                                       data_interval_end, dag_run.run_after)

    @task
    def delta_maintenance(params=None) -> dict:
        return orchestration.delta_maintenance(params["vacuum_retention_hours"])

    reports = validation_report.expand(refitted=refit.expand(config_path=apps()))
    corrections = correction.expand(reported=history_report.expand(validated=reports))
    corrections >> delta_maintenance()


recalibrate_nightly()
