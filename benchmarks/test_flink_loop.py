"""Issue 11 benchmark: the real Flink load job in the loop.

For each source rate (env ``FLINK_BENCH_RATES``, default 150,250,350 records/s; ``parse``
costs 4 ms a record, so one subtask saturates at 250/s) the job starts at parallelism 1 and
is replanned until the plan keeps the running parallelism (at most ``FLINK_BENCH_MAX_REPLANS``),
with the ``flink-parallelism`` method, with a busy-time rule like the Flink autoscaler's
(p' = ceil(p · busy / target utilisation)), and with the method behind the guardrails
(scale-down only after two consecutive recommendations). Each replan measures one window of
``FLINK_BENCH_WINDOW_S`` seconds through the flink-rest adapter, fits the busy-time model in
process (the same estimator as the pipeline's ``busy_time`` calibration: S = busy / records,
λ = records / window; Spark is kept out of a loop of ~20 replans on two shared cores) and
restarts the job with the new parallelism overrides. Reported per rate and method: replans
until stable, the final parallelism, the predicted utilisation of ``parse`` next to the one
measured after the change, the throughput against the source rate, and the restart downtimes.
There is no paper figure: the comparison is against the busy-time rule.

Run: ``.venv/bin/python -m pytest -m bench benchmarks/test_flink_loop.py -p no:cacheprovider``
Results: ``benchmarks/results/flink_loop.json``.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict
from datetime import UTC, datetime

import pytest

from optimizers.flink_parallelism import plan_flink_parallelism, predict
from streamplan.config import load_config
from streamplan.fitted import Deployment, FittedModel, NodeState, OperatorModel, QueryModel
from streamplan.flink.actuate import target_parallelism
from streamplan.flink.cluster import JOB_JAR, FlinkJob, JobSpec
from streamplan.flink.loop import node_info
from streamplan.flink.rest import collect, scrape
from streamplan.guardrails import GuardState, Guardrails, apply_guardrails
from streamplan.settings import REPO_ROOT

CONFIG = load_config(REPO_ROOT / "infra" / "flink" / "app.yaml")
COST_US = {"parse": 4000, "enrich": 300}
RATES = [float(r) for r in os.environ.get("FLINK_BENCH_RATES", "150,250,350").split(",")]
WINDOW_S = float(os.environ.get("FLINK_BENCH_WINDOW_S", "5"))
MAX_REPLANS = int(os.environ.get("FLINK_BENCH_MAX_REPLANS", "4"))
TARGET = CONFIG.method.params["target_utilisation"]
SETTLE_S = 8.0  # after a (re)start, before the first window


def window(job, tmp_path, attempts: int = 3) -> dict[str, list[dict]]:
    """Operator records of one clean window, by operator (a window with problems, e.g. a
    subtask busy with no records yet right after a restart, is measured again)."""
    for attempt in range(attempts):
        path, problems = collect(job.rest, CONFIG.app, [o.name for o in CONFIG.operators],
                                 node_info(CONFIG), WINDOW_S, tmp_path / str(attempt), job.job_id)
        if not problems:
            break
    assert problems == [], [str(p) for p in problems]
    by_op: dict[str, list[dict]] = {}
    for r in map(json.loads, path.read_text().splitlines()):
        if r["kind"] == "operator":
            by_op.setdefault(r["operator"], []).append(r)
    return by_op


def busy_time_model(by_op: dict[str, list[dict]]) -> FittedModel:
    """Busy-time fit of one window: λ = Σ records_in / window, S = Σ busy / Σ records_in."""
    ops = {}
    for op, recs in by_op.items():
        w = recs[0]["window_s"]
        rin = sum(r["records_in"] for r in recs)
        busy_s = sum(r["busy_ms"] for r in recs) / 1000
        s = busy_s / rin if rin else 0.0
        ops[op] = OperatorModel(
            operator=op, query="load", arrival_rate_mean=rin / w, arrival_rate_max=rin / w,
            arrival_rate_p95=rin / w, service_mean_s=s, service_m2_s2=2 * s * s, service_scv=1.0,
            selectivity=sum(r["records_out"] for r in recs) / rin if rin else 0.0,
            utilisation=busy_s / (w * len(recs)), calibration="busy_time", samples=1)
    return FittedModel(
        model_id="bench", app=CONFIG.app, window_start="", window_end="", rate_statistic="mean",
        operators=ops,
        queries={"load": QueryModel(query="load", arrival_rate_mean=0, arrival_rate_max=0,
                                    arrival_rate_p95=0, service_mean_s=0, service_m2_s2=0,
                                    events=0)},
        deployment=Deployment(placement={op: [("tm-1", len(r))] for op, r in by_op.items()},
                              nodes={"tm-1": NodeState(type="minicluster")}))


def busy_rule(model: FittedModel) -> tuple[dict[str, int], float | None]:
    """Autoscaler-like rule: p' = ceil(p · mean busy fraction / target); no prediction of RT."""
    par = {}
    for op, m in model.operators.items():
        p = model.deployment.placement[op][0][1]
        par[op] = min(8, max(1, math.ceil(p * m.utilisation / TARGET - 1e-9)))
    return par, None


def our_method(model: FittedModel) -> tuple[dict[str, int], float]:
    d = plan_flink_parallelism(model, CONFIG)
    return target_parallelism(d), d.predicted.extra["utilisation.parse"]


class Guarded:
    """flink-parallelism behind the guardrails (delayed scale-down after two consecutive
    recommendations, no stabilisation wait), their state kept across the replans."""

    def __init__(self) -> None:
        self.state = GuardState()
        self.rules = Guardrails(stabilisation_s=0, scale_down_after=2)

    def __call__(self, model: FittedModel) -> tuple[dict[str, int], float]:
        proposal = plan_flink_parallelism(model, CONFIG)
        now = datetime.now(UTC)
        current = {op: model.deployment.placement[op][0][1] for op in model.operators}
        out = apply_guardrails(target_parallelism(proposal), current, self.state, now, self.rules)
        self.state = out.state
        return out.parallelism, predict(model, CONFIG, out.parallelism)[1]["parse"]


def run_loop(decide, rate: float, tmp_path) -> dict:
    spec = JobSpec(rate=rate, cost_us=COST_US, selectivity={"aggregate": 0.5})
    steps, stable = [], False
    with FlinkJob(spec, tmp_path / f"job-{rate}.log") as job:
        time.sleep(SETTLE_S)
        for i in range(1, MAX_REPLANS + 1):
            by_op = window(job, tmp_path / f"w{i}")
            model = busy_time_model(by_op)
            parse = by_op["parse"]
            measured = {
                "parallelism": len(parse),
                "utilisation_parse": max(r["busy_ms"] / (r["window_s"] * 1000) for r in parse),
                "throughput": sum(r["records_in"] for r in parse) / parse[0]["window_s"],
            }
            if steps:
                steps[-1]["measured_after"] = measured
            current = {op: len(r) for op, r in by_op.items()}
            par, predicted = decide(model)
            step = {"replan": i, "measured": measured, "decided": par,
                    "predicted_utilisation_parse": predicted}
            steps.append(step)
            if par == current:
                stable = True
                break
            vertices = scrape(job.rest, job.job_id).vertices
            overrides = {vertices[op][0]: p for op, p in par.items()}
            spec = JobSpec(**{**asdict(job.spec), "overrides": overrides})
            step["downtime_s"] = job.restart(spec)
            time.sleep(SETTLE_S)
    final = steps[-1]
    return {
        "replans_until_stable": len(steps) if stable else None,
        "final_parallelism_parse": final["measured"]["parallelism"],
        "final_throughput": final["measured"]["throughput"],
        "final_utilisation_parse": final["measured"]["utilisation_parse"],
        "downtime_s": [s["downtime_s"] for s in steps if "downtime_s" in s],
        "predicted_vs_measured_utilisation_parse": [
            [s["predicted_utilisation_parse"], s["measured_after"]["utilisation_parse"]]
            for s in steps if "measured_after" in s
        ],
        "steps": steps,
    }


@pytest.mark.bench
def test_flink_loop(write_result, tmp_path):
    assert JOB_JAR.is_file(), "run infra/flink/build.sh"
    rows = []
    for rate in RATES:
        methods = (("flink-parallelism", our_method), ("busy-time rule", busy_rule),
                   ("flink-parallelism + guardrails", Guarded()))
        for name, decide in methods:
            result = run_loop(decide, rate, tmp_path / f"{name}-{rate}")
            rows.append({"rate": rate, "method": name, **result})
            write_result("flink_loop", {
                "setup": {"rates": RATES, "cost_us": COST_US, "window_s": WINDOW_S,
                          "target_utilisation": TARGET, "max_replans": MAX_REPLANS,
                          "capacity_per_parse_subtask": 1e6 / COST_US["parse"]},
                "paper": "none: issue 11 compares with a busy-time rule (Flink autoscaler)",
                "tolerance": {"throughput_vs_rate": 0.15,
                              "predicted_vs_measured_utilisation": 0.15},
                "deviations": (
                    "A saturated operator shows only its throughput, so the first plan's predicted "
                    "utilisation (from the saturated rate) is below the one measured after the "
                    "change; the next replan sees the true rate. Measured busy time per record is "
                    "above the configured 4 ms on the loaded machine (parking overshoot), which "
                    "adds to the gap. Without a response-time bound binding, both methods size "
                    "from the same load: λ·S = (records/window)·(busy/records) = Σ busy/window, "
                    "so p = ceil(load / target) for both; their runs differ only through the "
                    "busyTimeMsPerSecond samples each run happened to read. A low sample right "
                    "after a scale-up makes either scale down again (oscillation) unless the "
                    "guardrails' delayed scale-down holds it (third method)."),
                "rows": rows,
                "completed": len(rows), "planned": 3 * len(RATES),
            })
    for row in rows:
        assert row["final_throughput"] == pytest.approx(row["rate"], rel=0.15)
