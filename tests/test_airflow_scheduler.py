"""A real Airflow: api-server + scheduler + dag-processor (LocalExecutor, SQLite) on
127.0.0.1 in a temporary AIRFLOW_HOME, started by ``infra/airflow/local.py``.

The telemetry of the last 10 minutes of an hour is landed in silver first, in this process
with the ``telemetry_ingest`` task functions (``dag.test()`` of that DAG is covered by
``test_dags.py``). The test then unpauses and triggers ``replan_hourly`` for the hour, waits
for success with a bounded timeout, checks the published plan and its MLflow run, and stops
every process it started. Each task runs in its own process and starts its own Spark JVM,
as in production. Time-based and asset-triggered runs are switched off
(``use_job_schedule=False``) so the wall clock cannot add runs the test did not ask for.
"""

from __future__ import annotations

import shutil
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from infra.airflow import local as local_airflow
from streamplan import orchestration
from streamplan.plan import Plan, plan_id_for
from streamplan.settings import load_settings
from tests.conftest import DEMO_CONFIG

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

HOUR = datetime(2026, 1, 5, 1, tzinfo=UTC)
RUN_TIMEOUT_S = 600  # replan_hourly took 156-191 s with the 2 cores shared (load 6-10)


@pytest.fixture
def airflow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A running local Airflow whose tasks work in a fresh STREAMPLAN_HOME; stopped at the
    end even when the test fails (the test itself checks that the stop is clean)."""
    config = tmp_path / "kitchen.yaml"
    shutil.copy(DEMO_CONFIG, config)
    home = tmp_path / "streamplan"
    monkeypatch.delenv("STREAMPLAN_MLFLOW_URI", raising=False)
    monkeypatch.setenv("STREAMPLAN_HOME", str(home))  # for this process and for Airflow's
    monkeypatch.setenv("STREAMPLAN_APPS", str(config))
    instance = local_airflow.start(
        tmp_path / "airflow",
        extra_env={
            "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
            "TQDM_DISABLE": "1",
            "GX_ANALYTICS_ENABLED": "false",
        },
    )
    instance.streamplan_home = home
    instance.app_config = str(config)
    try:
        yield instance
    finally:
        instance.stop()


def _run(af: local_airflow.LocalAirflow, dag_id: str, run_id: str) -> float:
    af.wait_dag(dag_id, timeout=180)
    af.unpause(dag_id)
    started = time.monotonic()
    af.trigger(dag_id, HOUR.isoformat(), run_id)
    state = af.wait_run(dag_id, run_id, RUN_TIMEOUT_S)
    seconds = time.monotonic() - started
    states = af.task_states(dag_id, run_id)
    assert state == "success", f"{dag_id}: {states}\n{af.log_tail()}"
    assert set(states.values()) == {"success"}, states
    return seconds


def test_scheduler_runs_replan_hourly(airflow: local_airflow.LocalAirflow, spark) -> None:
    af = airflow
    components = {name: p.pid for name, p in af.procs.items()}
    assert set(components) == {"api-server", "scheduler", "dag-processor"}

    assert orchestration.simulate(af.app_config, HOUR)["reason"] == "simulated"
    assert orchestration.ingest(af.app_config, HOUR)["rows_landed"] > 0
    validated = orchestration.validate(af.app_config, HOUR)
    assert validated["silver"]["query_metrics"] == 60 * 3 and validated["quarantined"] == 0

    replan_s = _run(af, "replan_hourly", "test-replan")
    print(f"\nreplan_hourly under the scheduler: {replan_s:.0f} s from trigger to success "
          "(each task in its own process, fit with its own Spark JVM)")
    published = af.xcom("replan_hourly", "test-replan", "publish", 0)
    plan_id = plan_id_for("kitchen", HOUR.isoformat(), "binpack")
    assert published["plan_id"] == plan_id and published["became_current"] is True

    settings = load_settings(af.streamplan_home)
    current = Plan.model_validate_json(
        (settings.publish_dir / "kitchen" / "current.json").read_text())
    assert current.plan_id == plan_id and current.feasible
    assert current.mlflow_run_id == published["mlflow_run_id"]
    client = MlflowClient(settings.tracking_uri)
    run = client.get_run(current.mlflow_run_id)
    assert run.data.tags["streamplan.live"] == "true"
    assert run.data.tags["streamplan.plan_id"] == plan_id
    assert run.data.params["interval_end"] == HOUR.isoformat()
    assert {"plan", "model"} <= {a.path for a in client.list_artifacts(run.info.run_id)}

    left = af.stop()
    assert left == [], f"processes left after stop: {left}"
    for name, pid in components.items():
        assert af.procs[name].poll() is not None, f"{name} (pid {pid}) still running"
