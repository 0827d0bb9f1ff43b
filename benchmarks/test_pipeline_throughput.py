"""Ingest + validate + fit of 1 million telemetry rows on local[2]: rows/s per stage.

The rows are synthetic but contract-valid operator records (9 operators × 20 instances ×
~5556 windows of 10 s); the simulator is not used because 1M rows would mean days of
simulated traffic. Run: `.venv/bin/python -m pytest -m bench benchmarks/test_pipeline_throughput.py`.
"""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from pipelines.spark import get_spark
from streamplan import stages
from streamplan.config import load_config
from streamplan.settings import REPO_ROOT, load_settings

ROWS = int(os.environ.get("STREAMPLAN_BENCH_ROWS", 1_000_000))
INSTANCES = 20


def write_rows(path: Path, config, start: datetime, rows: int) -> stages.Interval:
    """Write ``rows`` operator records, spread over instances and windows, as NDJSON."""
    ops = [o.name for o in config.operators]
    per_window = len(ops) * INSTANCES
    windows = rows // per_window
    rng = np.random.default_rng(1)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        for w in range(windows):
            ts = (start + timedelta(seconds=10 * (w + 1))).strftime("%Y-%m-%dT%H:%M:%SZ")
            rin = rng.poisson(200, per_window)
            busy = rin * rng.uniform(0.1, 0.5, per_window)
            for k in range(per_window):
                fh.write(json.dumps({
                    "kind": "operator", "ts": ts, "window_s": 10.0, "app": config.app,
                    "operator": ops[k % len(ops)], "instance": k // len(ops), "node": "vm-1",
                    "records_in": int(rin[k]), "records_out": int(rin[k]),
                    "busy_ms": float(busy[k]),
                }) + "\n")
    return stages.Interval(start, start + timedelta(seconds=10 * windows))


@pytest.mark.bench
@pytest.mark.timeout(3600)
def test_million_rows(tmp_path: Path, write_result) -> None:
    config = load_config(REPO_ROOT / "configs" / "demo.yaml")
    settings = load_settings(tmp_path / "home")
    start = datetime(2026, 1, 1, tzinfo=UTC)
    interval = write_rows(stages.landing_dir(settings, config.app) / "big.ndjson", config,
                          start, ROWS)
    spark = get_spark(settings)
    timings: dict[str, float] = {}

    def record(stage: str, started: float) -> None:
        """Write after every stage, so a run cut short still leaves its figures."""
        timings[stage] = time.perf_counter() - started
        write_result("pipeline_throughput", {
            "rows": ROWS,
            "seconds": {k: round(v, 1) for k, v in timings.items()},
            "rows_per_s": {k: round(ROWS / v) for k, v in timings.items()},
            "stages_done": list(timings),
            "target": "whole demo (excluding first install) under 3 minutes; no paper figure",
        })

    try:
        t = time.perf_counter()
        ingest = stages.run_ingest(spark, settings, config, interval)
        record("ingest", t)
        t = time.perf_counter()
        report = stages.run_validate(spark, settings, config, interval)
        record("validate", t)
        t = time.perf_counter()
        stages.run_fit(spark, settings, config, interval)
        record("fit", t)
    finally:
        spark.stop()
    assert ingest.rows_landed == report.rows_in == sum(report.silver.values()) + report.quarantined
    assert report.quarantined == 0
