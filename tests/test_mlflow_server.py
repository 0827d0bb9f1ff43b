"""The pipeline against a real MLflow tracking server (``infra/mlflow/server.py`` on
127.0.0.1, SQLite backend, proxied artifacts), and a clear failure when the server is down."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from infra.mlflow import server as mlflow_server
from infra.services import free_port
from streamplan import stages
from streamplan.config import AppConfig
from streamplan.publish import current_plan
from streamplan.settings import load_settings
from streamplan.tracking import TrackingUnavailable
from tests.test_binpack import BUSY, fitted

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

END = datetime(2026, 1, 1, 1, tzinfo=UTC)
INTERVAL = stages.Interval(END - timedelta(hours=1), END)


@pytest.fixture
def server(tmp_path: Path):
    running = mlflow_server.start(tmp_path / "mlflow-server")
    try:
        yield running
    finally:
        left = running.stop()
        assert left == [], f"mlflow server processes left: {left}"


def test_plan_is_logged_to_the_server_and_read_back(server, tmp_path: Path,
                                                    demo_config: AppConfig) -> None:
    settings = load_settings(tmp_path / "home").model_copy(
        update={"mlflow_tracking_uri": server.uri})
    plan = stages.run_plan(settings, demo_config, fitted(demo_config, BUSY), INTERVAL)
    assert plan.mlflow_run_id
    run = MlflowClient(server.uri).get_run(plan.mlflow_run_id)
    assert run.data.tags["streamplan.plan_id"] == plan.plan_id
    assert run.data.params["method"] == "binpack"
    assert run.data.metrics  # objective, predicted RT per query, ...
    local = MlflowClient(server.uri).download_artifacts(plan.mlflow_run_id, "plan/plan.json",
                                                        str(tmp_path / "dl"))
    assert plan.plan_id in Path(local).read_text()
    # artifacts went through the server into its own store, nothing under the pipeline home
    stored = list((server.home / "artifacts").rglob("plan.json"))
    assert stored and not list((settings.home).rglob("plan/plan.json"))
    again = stages.run_plan(settings, demo_config, fitted(demo_config, BUSY), INTERVAL)
    assert again.mlflow_run_id == plan.mlflow_run_id, "re-planning the hour reuses its run"


def test_unreachable_server_fails_clearly_and_publishes_nothing(tmp_path: Path,
                                                                demo_config: AppConfig) -> None:
    uri = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    settings = load_settings(tmp_path / "home").model_copy(update={"mlflow_tracking_uri": uri})
    with pytest.raises(TrackingUnavailable, match=rf"{uri} .*unreachable"):
        stages.run_plan(settings, demo_config, fitted(demo_config, BUSY), INTERVAL)
    assert not list(settings.publish_dir.rglob("*.json")), "no plan file, no current.json"
    assert current_plan(settings.publish_dir, demo_config.app) is None
