"""Scale-out: ingest, validate and fit on a real Spark standalone cluster (a master and two
workers on 127.0.0.1, from ``infra/spark/standalone.py``) give the same tables and the same
fitted model as local mode. The cluster run is a separate driver process (this process
already holds the local session); the test stops the cluster and checks nothing is left."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from infra.spark import standalone
from pipelines.tables import silver_path
from streamplan import stages
from streamplan.config import load_config
from streamplan.fitted import FittedModel
from streamplan.settings import REPO_ROOT, load_settings
from tests.conftest import DEMO_CONFIG

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

START = datetime(2026, 1, 1, tzinfo=UTC)
INTERVAL = stages.Interval(START, START + timedelta(seconds=300))
TABLES = ("operator_metrics", "query_metrics", "node_metrics", "deployments")

# the driver of the cluster run: the same stage functions as the CLI and the DAGs. It runs
# as a script file: under ``python -c`` pyspark.sql.connect takes itself for a doctest run
# and exits 0 on import ("Skipping doctests").
DRIVER = """
import sys
from datetime import datetime
from streamplan import stages
from streamplan.config import load_config
from streamplan.settings import load_settings
settings, config = load_settings(), load_config(sys.argv[1])
interval = stages.Interval(datetime.fromisoformat(sys.argv[2]), datetime.fromisoformat(sys.argv[3]))
with stages.spark_session(settings) as spark:
    assert spark.sparkContext.master == settings.spark_master, spark.sparkContext.master
    stages.run_ingest(spark, settings, config, interval)
    stages.run_validate(spark, settings, config, interval)
    model = stages.run_fit(spark, settings, config, interval)
    executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
print(f"EXECUTORS {executors}", file=sys.stderr)
print(f"MODEL {stages.model_path(settings, model.model_id)}", file=sys.stderr)
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    running = standalone.start(tmp_path_factory.mktemp("spark-cluster"), workers=2, cores=1)
    try:
        yield running
    finally:
        left = running.stop()
        assert left == [], f"cluster processes left after stop: {left}"


def _landed_home(tmp: Path):
    settings = load_settings(tmp)
    config = load_config(DEMO_CONFIG)
    types = {n.name: n.type for n in config.nodes}
    stages.simulate_telemetry(settings, config, dict(config.deployment), types, INTERVAL, 0.0)
    return settings, config


def _counts(spark, lake: Path) -> dict[str, int]:
    return {t: spark.read.format("delta").load(silver_path(lake, t)).count() for t in TABLES}


def test_cluster_gives_the_same_tables_and_model_as_local(cluster, spark, tmp_path) -> None:
    assert len(cluster.status()["workers"]) == 2
    remote, config = _landed_home(tmp_path / "cluster")
    env = {**os.environ, "STREAMPLAN_HOME": str(remote.home),
           "STREAMPLAN_SPARK_MASTER": cluster.master_url, "SPARK_LOCAL_IP": "127.0.0.1"}
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    run = subprocess.run(
        [sys.executable, str(driver), str(DEMO_CONFIG), INTERVAL.start.isoformat(),
         INTERVAL.end.isoformat()],
        env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=900,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in run.stderr.splitlines()
                 if line.startswith(("EXECUTORS ", "MODEL ")))
    assert int(lines["EXECUTORS"]) == 2, "both workers ran executors"
    on_cluster = FittedModel.model_validate_json(Path(lines["MODEL"]).read_text())

    local, _ = _landed_home(tmp_path / "local")
    stages.run_ingest(spark, local, config, INTERVAL)
    stages.run_validate(spark, local, config, INTERVAL)
    in_process = stages.run_fit(spark, local, config, INTERVAL)

    assert _counts(spark, remote.lake) == _counts(spark, local.lake)
    assert on_cluster.model_id == in_process.model_id
    a = json.loads(on_cluster.model_dump_json(exclude={"delta_versions"}))
    b = json.loads(in_process.model_dump_json(exclude={"delta_versions"}))
    assert a.keys() == b.keys()
    _assert_close(a, b, path="model")


def _assert_close(a, b, path: str) -> None:
    """Equal structure; floats equal up to summation order (1e-9 relative)."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            _assert_close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_close(x, y, f"{path}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-12), path
    else:
        assert a == b, path
