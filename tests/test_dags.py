"""The Airflow DAGs: they parse, have the intended schedules, tasks and retries, and run end
to end with ``dag.test()`` on simulated telemetry against real Spark, Delta and MLflow.

One module-scoped backfill drives the end-to-end tests: for three consecutive hours,
``telemetry_ingest`` lands the hour's last 10 minutes and ``replan_hourly`` plans the hour;
the fourth hour's run only measures (its fit/plan/publish are marked success), so the three
plans are each measured against the hour after them. Then the second hour is re-run (ingest
and replan) and must change nothing, and ``recalibrate_nightly`` reports on the day.

``dag.test()`` runs tasks in this process: they reuse the session-wide ``spark`` fixture,
so no task starts its own JVM here (the scheduler test covers that path).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from streamplan.plan import Plan, plan_id_for
from streamplan.publish import current_plan
from streamplan.settings import REPO_ROOT, Settings, load_settings
from tests.conftest import DEMO_CONFIG

DAGS = REPO_ROOT / "dags"
DAG_IDS = {"telemetry_ingest", "replan_hourly", "recalibrate_nightly"}
SILVER = ("operator_metrics", "query_metrics", "node_metrics", "link_metrics", "deployments")
HOURS = [datetime(2026, 1, 5, h, tzinfo=UTC) for h in (1, 2, 3, 4)]
APP = "kitchen"

# the module-scoped backfill runs inside the first end-to-end test's setup: 8.5-10.5 min
# measured with the 2 cores shared by other jobs (load 6-8); pyproject's 900 s is too tight
pytestmark = [
    pytest.mark.timeout(1800),
    pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`"),
]


# --- Airflow in a temporary home ---------------------------------------------------------------
@pytest.fixture(scope="module")
def airflow_home(tmp_path_factory: pytest.TempPathFactory):
    """A fresh AIRFLOW_HOME (SQLite, no examples, DAGs from ``dags/``), migrated before
    Airflow is imported in this process: its configuration is read once, on import."""
    if "airflow.configuration" in sys.modules:
        configured = os.environ.get("AIRFLOW_HOME")
        pytest.fail(f"airflow was imported before this module set AIRFLOW_HOME ({configured})")
    home = tmp_path_factory.mktemp("airflow-home")
    env = {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__PARALLELISM": "4",
    }
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        migrate = subprocess.run(
            [str(Path(sys.executable).parent / "airflow"), "db", "migrate"],
            env=os.environ.copy(), capture_output=True, text=True, timeout=600,
        )
        assert migrate.returncode == 0, migrate.stdout[-2000:] + migrate.stderr[-2000:]
        yield home


@pytest.fixture(scope="module")
def dagbag(airflow_home: Path):
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(DAGS))


def test_dags_import_without_errors(dagbag) -> None:
    assert dagbag.import_errors == {}
    assert set(dagbag.dag_ids) == DAG_IDS


def test_schedules(dagbag) -> None:
    from airflow.sdk import AssetOrTimeSchedule, CronTriggerTimetable

    ingest = dagbag.get_dag("telemetry_ingest").timetable
    assert isinstance(ingest, CronTriggerTimetable)
    assert (ingest.expression, ingest.interval) == ("*/10 * * * *", timedelta(minutes=10))

    replan = dagbag.get_dag("replan_hourly").timetable
    assert isinstance(replan, AssetOrTimeSchedule)
    assert isinstance(replan.timetable, CronTriggerTimetable)
    assert (replan.timetable.expression, replan.timetable.interval) == (
        "0 * * * *", timedelta(hours=1))
    assert replan.asset_condition.name == "streamplan.silver.hour_closed"
    consumed = {replan.asset_condition.name}
    ingest_dag = dagbag.get_dag("telemetry_ingest")
    validate = ingest_dag.get_task("validate")
    assert {a.name for a in validate.outlets} == {f"streamplan.silver.{t}" for t in SILVER}
    closed = ingest_dag.get_task("hour_closed")
    assert {a.name for a in closed.outlets} == consumed, "replan waits on what ingest makes"

    nightly = dagbag.get_dag("recalibrate_nightly").timetable
    assert isinstance(nightly, CronTriggerTimetable)
    assert (nightly.expression, nightly.interval) == ("30 0 * * *", timedelta(days=1))
    for dag in dagbag.dags.values():
        assert dag.catchup is False and dag.max_active_runs == 1, dag.dag_id


@pytest.mark.parametrize(
    "dag_id, edges",
    [
        ("telemetry_ingest", {("apps", "simulate"), ("simulate", "ingest"),
                              ("ingest", "validate"), ("validate", "period_closes_hour"),
                              ("period_closes_hour", "hour_closed")}),
        ("replan_hourly", {("apps", "measure"), ("apps", "fit"), ("fit", "plan"),
                           ("plan", "publish")}),
        ("recalibrate_nightly", {("apps", "refit"), ("refit", "validation_report"),
                                 ("validation_report", "history_report"),
                                 ("history_report", "correction"),
                                 ("correction", "delta_maintenance")}),
    ],
)
def test_tasks_dependencies_and_retries(dagbag, dag_id: str, edges: set) -> None:
    dag = dagbag.get_dag(dag_id)
    found = {(t.task_id, d) for t in dag.tasks for d in t.downstream_task_ids}
    assert found == edges
    assert {t.task_id for t in dag.tasks} == {n for e in edges for n in e}
    for t in dag.tasks:
        assert t.retries == 2, t.task_id
        assert timedelta(0) < t.retry_delay <= timedelta(minutes=1), t.task_id
        assert t.execution_timeout is not None, t.task_id


def test_retention_param_and_env(dagbag, monkeypatch) -> None:
    from streamplan import orchestration

    params = dagbag.get_dag("recalibrate_nightly").params
    assert params["vacuum_retention_hours"] is None
    monkeypatch.delenv(orchestration.RETENTION_ENV, raising=False)
    assert orchestration.retention_hours(None) == 168.0
    monkeypatch.setenv(orchestration.RETENTION_ENV, "24")
    assert orchestration.retention_hours(None) == 24.0
    assert orchestration.retention_hours(0) == 0.0
    with pytest.raises(ValueError, match="retention"):
        orchestration.retention_hours(-1)


def test_periods_follow_data_interval_or_run_after() -> None:
    from streamplan.orchestration import INGEST_PERIOD, REPLAN_PERIOD, period_interval

    i = period_interval(INGEST_PERIOD, datetime(2026, 1, 5, 1, 0, tzinfo=UTC))
    assert (i.start, i.end) == (datetime(2026, 1, 5, 0, 50, tzinfo=UTC), HOURS[0])
    # an asset-triggered run has no data interval: the last complete hour before run_after
    i = period_interval(REPLAN_PERIOD, None, "2026-01-05T02:07:31+00:00")
    assert (i.start, i.end) == (HOURS[0], HOURS[1])


def test_app_list_from_env(monkeypatch, tmp_path: Path) -> None:
    from streamplan import orchestration

    monkeypatch.delenv(orchestration.APPS_ENV, raising=False)
    assert orchestration.app_config_paths() == [str(DEMO_CONFIG)]
    other = tmp_path / "b.yaml"
    other.write_text(DEMO_CONFIG.read_text().replace("app: kitchen", "app: other"))
    monkeypatch.setenv(orchestration.APPS_ENV, f"configs/demo.yaml, {other}")
    assert orchestration.configured_apps() == [str(DEMO_CONFIG), str(other)]
    monkeypatch.setenv(orchestration.APPS_ENV, f"{DEMO_CONFIG},{DEMO_CONFIG}")
    with pytest.raises(ValueError, match="configured twice"):
        orchestration.configured_apps()


# --- end to end with dag.test() -----------------------------------------------------------------
class World:
    """What the backfill did: its settings, lake/MLflow snapshots and run timings."""

    def __init__(self, settings: Settings, dagbag) -> None:
        self.settings = settings
        self.dagbag = dagbag
        self.seconds: dict[str, float] = {}
        self.snapshots: dict[str, dict] = {}

    def run(self, dag_id: str, when: datetime, label: str, **kwargs):
        started = time.monotonic()
        dr = self.dagbag.get_dag(dag_id).test(logical_date=when, **kwargs)
        self.seconds[label] = time.monotonic() - started
        states = {(ti.task_id, ti.map_index): ti.state for ti in dr.get_task_instances()}
        assert dr.state == "success", f"{label}: {states}"
        return dr


def plan_of(hour: datetime) -> str:
    return plan_id_for(APP, hour.isoformat(), "binpack")


def lake_counts(spark, settings: Settings) -> dict[str, int]:
    """Rows per Delta table of the lake (bronze, silver, quarantine, measured plans)."""
    lake = settings.lake
    paths = {f"silver.{t}": lake / "silver" / t for t in SILVER}
    paths |= {"bronze": lake / "bronze" / "telemetry", "quarantine": lake / "silver" / "quarantine",
              "plans_measured": lake / "gold" / "plans_measured"}
    out = {}
    for name, path in paths.items():
        if (path / "_delta_log").is_dir():
            out[name] = spark.read.format("delta").load(str(path)).count()
    return out


def mlflow_plans(settings: Settings) -> dict[str, object]:
    """Plan runs of the app in MLflow, by plan id."""
    c = MlflowClient(settings.tracking_uri)
    exp = c.get_experiment_by_name(f"streamplan-{APP}")
    runs = c.search_runs([exp.experiment_id], filter_string="tags.`streamplan.plan_id` != ''")
    return {r.data.tags["streamplan.plan_id"]: r for r in runs}


def snapshot(spark, settings: Settings) -> dict:
    published = settings.publish_dir / APP
    return {
        "counts": lake_counts(spark, settings),
        "runs": {p: r.info.run_id for p, r in mlflow_plans(settings).items()},
        "current": (published / "current.json").read_text(),
        "landing": sorted(p.name for p in (settings.landing / APP).iterdir()),
        "plans": {p.name: _decision(Plan.model_validate_json(p.read_text()))
                  for p in sorted((published / "plans").glob("*.json"))},
    }


def _decision(plan: Plan) -> dict:
    return {"placement": plan.model_dump()["placement"], "nodes": plan.nodes,
            "predicted": plan.predicted.model_dump(), "status": plan.solver.status}


@pytest.fixture(scope="module")
def world(spark, dagbag, tmp_path_factory: pytest.TempPathFactory) -> World:
    """Backfill three hours (+ the measuring part of the fourth), re-run the second hour,
    run the nightly for the day: all through dag.test(), in one fresh STREAMPLAN_HOME."""
    root = tmp_path_factory.mktemp("dags-e2e")
    config = root / "kitchen.yaml"
    shutil.copy(DEMO_CONFIG, config)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("STREAMPLAN_HOME", str(root / "home"))
        mp.setenv("STREAMPLAN_APPS", str(config))
        mp.delenv("STREAMPLAN_MLFLOW_URI", raising=False)
        w = World(load_settings(), dagbag)
        for hour in HOURS[:3]:
            w.run("telemetry_ingest", hour, f"ingest {hour:%H:%M}")
            w.run("replan_hourly", hour, f"replan {hour:%H:%M}")
            if hour == HOURS[0]:
                w.snapshots["first"] = snapshot(spark, w.settings)
        w.run("telemetry_ingest", HOURS[3], f"ingest {HOURS[3]:%H:%M}")
        w.run("replan_hourly", HOURS[3], f"measure {HOURS[3]:%H:%M}",
              mark_success_pattern="fit|plan|publish")
        w.snapshots["backfilled"] = snapshot(spark, w.settings)
        w.run("telemetry_ingest", HOURS[1], "re-run ingest 02:00")
        w.run("replan_hourly", HOURS[1], "re-run replan 02:00")
        w.snapshots["rerun"] = snapshot(spark, w.settings)
        # Delta maintenance is tested on its own below (VACUUM runs ~20 Spark jobs a table)
        w.run("recalibrate_nightly", datetime(2026, 1, 6, 0, 30, tzinfo=UTC), "nightly",
              mark_success_pattern="delta_maintenance")
        w.snapshots["nightly"] = snapshot(spark, w.settings)
        yield w
    print("\n".join(f"{k:>22}: {v:6.1f} s" for k, v in w.seconds.items()))


def test_ingest_lands_silver_and_emits_assets(world: World) -> None:
    counts = world.snapshots["first"]["counts"]
    for table in ("operator_metrics", "query_metrics", "node_metrics", "deployments"):
        assert counts[f"silver.{table}"] > 0, table
    # 10 minutes of 10-s windows: 60 windows x (9 operators + 3 queries + node + deployment)
    assert counts["silver.query_metrics"] == 60 * 3
    assert counts["bronze"] == sum(v for k, v in counts.items() if k.startswith("silver."))

    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        events = session.execute(
            select(AssetModel.name).join(AssetEvent, AssetEvent.asset_id == AssetModel.id)
        ).scalars().all()
    assert {f"streamplan.silver.{t}" for t in SILVER} <= set(events)
    assert "streamplan.silver.hour_closed" in events, "the backfilled periods end on the hour"


def test_replan_publishes_and_logs_the_plan(world: World) -> None:
    first = world.snapshots["first"]
    plan = Plan.model_validate_json(first["current"])
    assert plan.plan_id == plan_of(HOURS[0]) and plan.feasible
    assert plan.inputs.interval_start == HOURS[0].replace(hour=0).isoformat()
    assert "hire" in plan.nodes.values(), "the busy phase overloads vm-1"
    run = MlflowClient(world.settings.tracking_uri).get_run(first["runs"][plan.plan_id])
    assert run.data.tags["streamplan.plan_id"] == plan.plan_id
    assert run.data.params["interval_end"] == HOURS[0].isoformat()
    for q in ("spoon", "knife", "fork"):
        assert run.data.metrics[f"predicted_rt_ms.{q}"] == pytest.approx(
            plan.predicted.response_time_ms[q])
    arts = {a.path for a in MlflowClient(world.settings.tracking_uri).list_artifacts(
        run.info.run_id)}
    assert {"plan", "model", "validation"} <= arts


def test_only_small_values_go_through_xcom(world: World) -> None:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.scalars(select(XComModel)).all()
        sizes = {(x.dag_id, x.task_id, x.map_index): len(json.dumps(x.value)) for x in rows}
    assert {d for d, _, _ in sizes} == DAG_IDS
    assert max(sizes.values()) < 4096, sorted(sizes.items(), key=lambda kv: -kv[1])[:3]


def test_backfill_gives_three_plans_each_measured_against_the_next_hour(
    world: World, spark
) -> None:
    from pipelines.measure import measured_response_times

    snap = world.snapshots["backfilled"]
    assert set(snap["runs"]) == {plan_of(h) for h in HOURS[:3]}
    assert json.loads(snap["current"])["plan_id"] == plan_of(HOURS[2])
    runs = mlflow_plans(world.settings)
    measured_rows = spark.read.format("delta").load(
        str(world.settings.lake / "gold" / "plans_measured")).collect()
    until = {(r["plan_id"], r["query"]): r["measured_until"] for r in measured_rows}
    for made, after in zip(HOURS[:3], HOURS[1:]):
        run = runs[plan_of(made)]
        expected = measured_response_times(spark, world.settings.lake, APP,
                                           after - timedelta(hours=1), after)
        assert set(expected) == {"spoon", "knife", "fork"}
        for q, value in expected.items():
            assert run.data.metrics[f"measured_rt_ms.{q}"] == pytest.approx(value), (made, q)
            predicted = run.data.metrics[f"predicted_rt_ms.{q}"]
            assert run.data.metrics[f"rt_error_ms.{q}"] == pytest.approx(predicted - value)
            assert until[(plan_of(made), q)] == after.isoformat()
        assert run.data.tags["streamplan.measured"] == "true"
    live = [p for p, r in runs.items() if r.data.tags.get("streamplan.live") == "true"]
    assert live == [plan_of(HOURS[2])]
    # each hour's telemetry was simulated under the plan live at its start
    deployments = spark.read.format("delta").load(
        str(world.settings.lake / "silver" / "deployments"))
    for made, after in zip(HOURS[:3], HOURS[1:]):
        seen = {r["placement"] for r in deployments.where(
            (deployments.ts > after - timedelta(minutes=10)) & (deployments.ts <= after)
        ).collect()}
        plan = Plan.model_validate_json(
            (world.settings.publish_dir / APP / "plans" / f"{plan_of(made)}.json").read_text())
        placement = {op: [[e.node, e.replicas] for e in es] for op, es in plan.placement.items()}
        assert [json.loads(p) for p in seen] == [placement], made


def test_rerunning_an_hour_changes_nothing(world: World) -> None:
    before, after = world.snapshots["backfilled"], world.snapshots["rerun"]
    assert after["counts"] == before["counts"], "same bronze, silver, quarantine rows"
    assert after["runs"] == before["runs"], "same plan ids, same MLflow runs"
    assert after["landing"] == before["landing"], "the source is not simulated twice"
    assert after["plans"] == before["plans"], "same decisions and predictions"
    assert json.loads(after["current"])["plan_id"] == plan_of(HOURS[2]), "newer plan stays live"


def test_nightly_recalibrates_and_reports(world: World) -> None:
    settings = world.settings
    c = MlflowClient(settings.tracking_uri)
    exp = c.get_experiment_by_name(f"streamplan-{APP}")
    nightly = c.search_runs([exp.experiment_id], filter_string="tags.`streamplan.kind` = 'nightly'")
    assert len(nightly) == 1
    run = nightly[0]
    m = run.data.metrics
    for op in ("spoon_window", "knife_features", "fork_match"):
        assert m[f"service_mean_ci_low_ms.{op}"] <= m[f"service_mean_ms.{op}"] \
            <= m[f"service_mean_ci_high_ms.{op}"], op
        assert m[f"windows.{op}"] == 4 * 60, "four landed 10-minute periods of the day"
    assert m["history.plans"] == 3 and m["history.measured"] == 3
    # the correction is fitted on the three plans x three queries measured during the day
    assert m["correction.pairs"] == 9 and run.data.tags["streamplan.correction"] == "applied"
    from streamplan.corrections import correction_at

    assert correction_at(settings, APP, datetime(2026, 1, 6, tzinfo=UTC)).correction.pairs == 9
    arts = {a.path for a in c.list_artifacts(run.info.run_id, "history")}
    assert {"history/plans.json", f"history/plan-history-{APP}-20260106T000000Z.csv",
            f"history/plan-history-{APP}-20260106T000000Z.png"} <= arts
    assert c.list_artifacts(run.info.run_id, "validation")
    assert c.list_artifacts(run.info.run_id, "model")
    table = (settings.reports / f"plan-history-{APP}-20260106T000000Z.csv").read_text()
    assert table.count(plan_of(HOURS[0])) == 3, "one row per query"
    # the history report is not a plan: the plan history still lists plans only
    from streamplan.history import plan_history

    assert {r.plan_id for r in plan_history(settings, APP)} == {plan_of(h) for h in HOURS[:3]}
    assert world.snapshots["nightly"]["counts"] == world.snapshots["rerun"]["counts"]


def test_delta_maintenance_compacts_and_vacuums(spark, tmp_path: Path, monkeypatch) -> None:
    """OPTIMIZE + VACUUM with a retention under Delta's 168 h floor (the check is turned off
    for that call only): same rows, one file left, and a second run does nothing."""
    from pipelines.maintenance import RETENTION_CHECK
    from streamplan import orchestration

    monkeypatch.setenv("STREAMPLAN_HOME", str(tmp_path / "home"))
    table = load_settings().lake / "silver" / "query_metrics"
    for i in range(3):
        rows = spark.range(i * 10, i * 10 + 10).coalesce(1)
        rows.write.format("delta").mode("append").save(str(table))
    first = orchestration.delta_maintenance(0)
    done = first["tables"]["silver/query_metrics"]
    assert (done["files_compacted"], done["files_added"], done["files_left"]) == (3, 1, 1)
    assert first["files_removed"] == 3 and first["retention_hours"] == 0
    assert spark.read.format("delta").load(str(table)).count() == 30
    assert spark.conf.get(RETENTION_CHECK, "true") == "true", "the check is restored"
    again = orchestration.delta_maintenance(0)
    assert again["files_removed"] == 0
    assert again["tables"]["silver/query_metrics"]["files_compacted"] == 0
