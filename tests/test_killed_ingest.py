"""A task killed mid-write and re-run leaves the lake consistent: ``streamplan ingest`` is
SIGKILLed as soon as bronze has data files (before or while Delta commits them), then the
same interval is ingested again; bronze must hold every landed row exactly once, as a
clean run does. Delta's atomic commit makes uncommitted files invisible, and the content
hash of each landing file makes the re-run add only what was not committed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pipelines.tables import bronze_path
from streamplan import stages
from streamplan.config import load_config
from streamplan.settings import REPO_ROOT, load_settings
from tests.conftest import DEMO_CONFIG

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

START = datetime(2026, 1, 1, tzinfo=UTC)
INTERVAL = stages.Interval(START, START + timedelta(seconds=120))


def _landed(home: Path):
    settings, config = load_settings(home), load_config(DEMO_CONFIG)
    types = {n.name: n.type for n in config.nodes}
    stages.simulate_telemetry(settings, config, dict(config.deployment), types, INTERVAL, 0.0)
    return settings, config


def _kill_when_bronze_has_files(home: Path) -> str:
    """Run the CLI ingest and SIGKILL its process group once bronze has a data file."""
    env = {**os.environ, "STREAMPLAN_HOME": str(home)}
    cli = [sys.executable, "-m", "streamplan.cli", "ingest", "--config", str(DEMO_CONFIG),
           "--end", INTERVAL.end.isoformat(), "--duration-s", "120"]
    proc = subprocess.Popen(cli, env=env, cwd=REPO_ROOT, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    bronze = Path(bronze_path(home / "lake"))
    deadline = time.monotonic() + 600
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if any(bronze.glob("*.parquet")):
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
                committed = any((bronze / "_delta_log").glob("*.json"))
                return "killed after commit" if committed else "killed before commit"
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    return f"finished before the kill (exit {proc.returncode})"


def test_killed_ingest_rerun_lands_every_row_once(spark, tmp_path: Path) -> None:
    clean, config = _landed(tmp_path / "clean")
    expected = stages.run_ingest(spark, clean, config, INTERVAL).rows_landed
    assert expected > 0

    killed, _ = _landed(tmp_path / "killed")
    outcome = _kill_when_bronze_has_files(killed.home)
    assert outcome.startswith("killed"), outcome
    again = stages.run_ingest(spark, killed, config, INTERVAL)
    bronze = spark.read.format("delta").load(bronze_path(killed.lake))
    assert bronze.count() == expected, outcome
    assert bronze.select("row_id").distinct().count() == expected
    assert again.rows_landed in (0, expected), outcome
    assert stages.run_ingest(spark, killed, config, INTERVAL).rows_landed == 0, "idempotent"
