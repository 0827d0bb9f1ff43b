"""End to end on the real Flink job (Spark pipeline): a saturated operator at parallelism 1
is scaled up through collect → ingest → validate → fit → plan → publish → apply, its
busy time and the source's back-pressure fall and throughput meets the source rate; after the
source rate halves, the scale-down waits for the guardrail's consecutive recommendations.

Three Spark replans: about 12 minutes on two cores shared at load 12 (replans of 314 s and
188 s), so most of it is Spark stage overhead, not Flink."""

from __future__ import annotations

import json
import time
from dataclasses import asdict

import mlflow
import pytest

from streamplan.config import MethodSpec, load_config
from streamplan.flink.actuate import apply_plan, target_parallelism
from streamplan.flink.cluster import JOB_JAR, FlinkJob, JobSpec
from streamplan.flink.loop import node_info, replan
from streamplan.flink.rest import collect, scrape
from streamplan.guardrails import GuardState
from streamplan.settings import REPO_ROOT

COST_US = {"parse": 4000, "enrich": 300}  # parse: 250 records/s per subtask
RATE = 300.0
GUARDRAILS = {"stabilisation_s": 0, "scale_down_after": 2, "max_change": 4, "max_parallelism": 4}


def measure(job, config, tmp_path, window_s: float = 5.0) -> dict:
    """One window's operator records (by operator) and the source's back-pressure."""
    path, problems = collect(job.rest, config.app, [o.name for o in config.operators],
                             node_info(config), window_s, tmp_path, job.job_id, attempts=3)
    assert problems == []
    records = [json.loads(x) for x in path.read_text().splitlines() if '"operator"' in x]
    by_op: dict[str, list[dict]] = {}
    for r in records:
        by_op.setdefault(r["operator"], []).append(r)
    subtasks = scrape(job.rest, job.job_id).subtasks
    source = [s for (v, _), s in subtasks.items() if v == "Source: source"]
    return {"ops": by_op, "window_s": records[0]["window_s"],
            "source_backpressure": max(s.metrics["backPressuredTimeMsPerSecond"] for s in source)}


def test_scale_up_through_the_pipeline_then_delayed_scale_down(spark, settings, tmp_path):
    assert JOB_JAR.is_file(), "run infra/flink/build.sh"
    base = load_config(REPO_ROOT / "infra" / "flink" / "app.yaml")
    config = base.model_copy(update={"method": MethodSpec(
        name="flink-parallelism", params={**base.method.params, "guardrails": GUARDRAILS})})
    spec = JobSpec(rate=RATE, cost_us=COST_US, selectivity={"aggregate": 0.5})
    with FlinkJob(spec, tmp_path / "job.log") as job:
        time.sleep(4)
        state = GuardState()
        first = replan(spark, settings, config, job.rest, job.job_id, state)
        assert first.published.became_current
        # rows the adapter flagged (a new job's first seconds) are exactly the quarantined ones:
        # one per flagged subtask and window (a subtask can be flagged in two windows)
        flagged = sum(len({(p.vertex, p.subtask) for p in window if p.subtask is not None})
                      for window in first.problems)
        assert first.quarantined == flagged
        par = target_parallelism(first.plan)
        assert par["parse"] >= 2 and par["enrich"] == 1
        assert any("above the target" in w for w in first.plan.explanations["parse"])
        applied = apply_plan(job, first.plan, tmp_path / "applied")
        assert applied.downtime_s > 0 and [c["operator"] for c in applied.changes] == ["parse"]
        time.sleep(6)  # let the new job's gauges settle
        after = measure(job, config, tmp_path / "m1")
        parse = after["ops"]["parse"]
        assert len(parse) == par["parse"]
        window = after["window_s"]
        busiest = max(r["busy_ms"] for r in parse) / (window * 1000)
        throughput = sum(r["records_in"] for r in parse) / window
        assert busiest < 0.85, f"parse still saturated: busy {busiest:.2f}"
        assert throughput == pytest.approx(RATE, rel=0.15)
        assert after["source_backpressure"] < 150
        predicted = first.plan.predicted.extra["utilisation.parse"]
        with mlflow.start_run(run_id=first.plan.mlflow_run_id):
            mlflow.log_metrics({
                "measured.utilisation.parse": busiest, "predicted.utilisation.parse": predicted,
                "measured.throughput": throughput, "measured.downtime_s": applied.downtime_s,
            })
        # halve the load: the plan recommends fewer subtasks, the guardrail holds it once
        job.restart(JobSpec(**{**asdict(job.spec), "rate": RATE / 2}))
        time.sleep(4)
        state = first.state
        held = replan(spark, settings, config, job.rest, job.job_id, state, windows=1)
        assert target_parallelism(held.plan)["parse"] == par["parse"]
        assert any("held: recommended 1 of 2" in w for w in held.plan.explanations["parse"])
        down = replan(spark, settings, config, job.rest, job.job_id, held.state, windows=1)
        assert target_parallelism(down.plan)["parse"] < par["parse"]
        assert down.published.became_current
